//! The relay's one request engine: a request sent upstream (the host's own, translated,
//! or the relay's) and its answer read back, JSON or SSE, a lost session recovered and a
//! broken legacy stream resumed. What else arrives on the request's stream goes where the
//! request's owner says: routed as usual for the host's own, decided by the caller for the
//! rest.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use http::header::HeaderMap;

use crate::http::response::Response;
use crate::http::sse::{self, SseError, describe_body_error};
use crate::jsonrpc::error::with_error_object;
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message::{self, IdKey, Kind, Message};
use crate::relay::context::Ctx;
use crate::relay::gate::Failure;
use crate::relay::link::response::{
    error_code, is_event_stream, is_jsonrpc_error, read_capped, requested_delay, status_failure,
};
use crate::relay::link::session::Wire;
use crate::relay::link::sse as sse_link;
use crate::relay::link::transport::Transport;
use crate::relay::route::{Routed, route};

/// What to do with a message on the request's stream that is not its answer.
pub enum Aside {
    /// Send this line to the host.
    Host(Vec<u8>),
    /// Nothing.
    Ignore,
    /// POST this to the upstream (an answer to the server's own request) and read on.
    Upstream(Bytes),
    /// Give up on the request with this error, POSTing the bytes first if given.
    Fail(Failure, Option<Bytes>),
}

/// Decides about each message on the way; it sees the parsed message and its bytes.
pub type AsideFn<'a> = dyn FnMut(&Message<'_>, &[u8]) -> Aside + Send + 'a;

/// The request: its body, its (upstream) id, and how it is framed.
pub struct Outgoing<'a> {
    pub body: Bytes,
    pub id: &'a IdKey,
    /// The id as written in `body`, for an error the server sent with `id: null`.
    pub raw_id: &'a str,
    pub wire: Wire<'a>,
    pub replay_safe: bool,
}

/// Whose request it is, which decides what happens to the rest of its stream.
enum Owner<'a, 'f> {
    /// The host's own, passed through unchanged: the rest of its stream is routed as
    /// everything the upstream sends is (answers to other pending requests to the gate,
    /// the server's messages to the host, 2025-03-26 batches split); its POST may decide
    /// the transport; an `initialize` answer sets up the session.
    Host,
    /// One the relay made (translated, or its own): `aside` decides about the rest.
    Relay(&'a mut AsideFn<'f>),
}

/// Sends a request the relay made and returns the line that answers it (carrying the
/// request's own id); `aside` decides about everything else on its stream.
pub async fn call(
    ctx: &Ctx,
    request: Outgoing<'_>,
    aside: &mut AsideFn<'_>,
) -> Result<Vec<u8>, Failure> {
    send(ctx, &request, &mut Owner::Relay(aside)).await
}

/// Sends the host's own request (a legacy host on a legacy server) and returns its answer,
/// or an empty line when the answer was already delivered to the gate (it came on the
/// HTTP+SSE stream, or was an `id: null` error given the host's id).
pub async fn call_for_host(ctx: &Ctx, request: Outgoing<'_>) -> Result<Vec<u8>, Failure> {
    if ctx.link.is_sse() {
        return over_sse(ctx, &request).await;
    }
    send(ctx, &request, &mut Owner::Host).await
}

/// The one request engine: POST (a lost session recovered by the link), a 202 refused,
/// the answer read from JSON or from SSE (a broken legacy stream resumed).
async fn send(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    owner: &mut Owner<'_, '_>,
) -> Result<Vec<u8>, Failure> {
    let response = ctx
        .link
        .post(request.body.clone(), &request.wire, request.replay_safe)
        .await?;
    let status = response.status();
    if matches!(owner, Owner::Host) && ctx.link.transports.may_fall_back(status.as_u16()) {
        let retry_after = requested_delay(&response);
        let body = read_capped(response, ctx.link.upstream.max_message_size()).await?;
        // A 2026-07-28 server refusing a handshake-era request says so with -32022: it is
        // a Streamable HTTP server, so there is no HTTP+SSE stream to look for.
        if error_code(&body) == Some(crate::era::UNSUPPORTED_PROTOCOL_VERSION) {
            ctx.link.transports.decide(
                Transport::StreamableHttp,
                &format!("the POST got HTTP {status} with a 2026-07-28 -32022"),
            );
        } else if ctx.link.learn_transport(status).await {
            return over_sse(ctx, request).await;
        }
        return answer_from_body(ctx, request, owner, status, retry_after, body).await;
    }
    if status == StatusCode::ACCEPTED {
        return Err(Failure::upstream(
            "HTTP 202 from upstream: the server accepted the request but sent no answer",
        )
        .with_data(serde_json::json!({ "httpStatus": 202 })));
    }
    // Only an `initialize` answer needs the response headers (the session id) later.
    let initialize =
        matches!(owner, Owner::Host) && matches!(request.wire, Wire::Legacy { initialize: true });
    let headers = if initialize {
        response.headers().clone()
    } else {
        HeaderMap::new()
    };
    let answer = read_answer(ctx, request, owner, response).await?;
    // A refused handshake establishes no session.
    if initialize && !answer.is_empty() && !is_jsonrpc_error(&answer) {
        ctx.link.upstream.adopt_initialize(&headers, &answer);
    }
    Ok(answer)
}

/// The host's request over the 2024-11-05 HTTP+SSE link; its answer arrives on the link's
/// stream and is delivered from there.
async fn over_sse(ctx: &Ctx, request: &Outgoing<'_>) -> Result<Vec<u8>, Failure> {
    let Some(link) = ctx.link.handle() else {
        return Err(Failure::upstream("the relay is shutting down"));
    };
    sse_link::exchange(&link, request.id, request.body.clone(), request.replay_safe).await?;
    Ok(Vec::new())
}

async fn read_answer(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    owner: &mut Owner<'_, '_>,
    response: Response,
) -> Result<Vec<u8>, Failure> {
    let status = response.status();
    if status.is_success() && is_event_stream(&response) {
        return read_stream(ctx, request, response, owner).await;
    }
    let retry_after = requested_delay(&response);
    let body = read_capped(response, ctx.link.upstream.max_message_size()).await?;
    answer_from_body(ctx, request, owner, status, retry_after, body).await
}

/// The answer in a whole (non-SSE) body, or the failure its status means.
async fn answer_from_body(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    owner: &mut Owner<'_, '_>,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: Vec<u8>,
) -> Result<Vec<u8>, Failure> {
    if status.is_success() && body.iter().all(u8::is_ascii_whitespace) {
        return Err(Failure::upstream(format!(
            "HTTP {status} from upstream with an empty body"
        )));
    }
    if !status.is_success()
        && matches!(request.wire, Wire::Legacy { .. })
        && error_code(&body) == Some(crate::era::UNSUPPORTED_PROTOCOL_VERSION)
    {
        ctx.eras.proven_wrong(
            crate::era::Era::Legacy,
            "a -32022 answer to a handshake-era request",
        );
    }
    // On an error status, a JSON-RPC error in the body is the most precise answer there is.
    if status.is_success() || is_jsonrpc_error(&body) {
        if let Some(answer) = take(ctx, request, &body, owner).await? {
            return Ok(answer);
        }
        if status.is_success() {
            return Err(Failure::upstream(format!(
                "HTTP {status} from upstream without an answer to this request"
            )));
        }
    }
    if matches!(request.wire, Wire::Modern { .. }) && matches!(status.as_u16(), 400 | 404 | 405) {
        ctx.eras.proven_wrong(
            crate::era::Era::Modern,
            &format!("HTTP {status} without a JSON-RPC answer to a 2026-07-28 request"),
        );
    }
    Err(status_failure(status, retry_after))
}

/// Reads the request's SSE stream to its answer. A legacy stream that breaks after the
/// server numbered its events (2025-11-25 priming ids) is resumed with GET and
/// `Last-Event-ID`, after the server's `retry:` delay; a 2026-07-28 stream cannot be.
async fn read_stream(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    response: Response,
    owner: &mut Owner<'_, '_>,
) -> Result<Vec<u8>, Failure> {
    let max = ctx.link.upstream.max_message_size();
    let resumable = matches!(request.wire, Wire::Legacy { .. });
    let mut events = sse::events(response, max);
    let mut last_event_id: Option<String> = None;
    let mut retry = None;
    let mut resumes_without_progress = 0;
    loop {
        let ended = loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(SseError::TooLarge(max))) => {
                    return Err(Failure::upstream(format!(
                        "the upstream answer exceeds --max-message-size ({max} bytes)"
                    )));
                }
                Some(Err(e)) => break format!("upstream stream interrupted: {e}"),
                None => break "upstream closed the stream before answering".to_owned(),
            };
            if event.id.is_some() {
                last_event_id = event.id;
                resumes_without_progress = 0;
            }
            if let Some(ms) = event.retry_ms {
                retry = Some(Duration::from_millis(ms));
            }
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            if let Some(answer) = take(ctx, request, data.as_bytes(), owner).await? {
                return Ok(answer);
            }
        };
        let Some(resume_from) = last_event_id.clone().filter(|_| resumable) else {
            return Err(lost(request, &ended));
        };
        if resumes_without_progress >= ctx.config.max_reconnects {
            return Err(lost(
                request,
                &format!("{ended}; gave up after {resumes_without_progress} resumption attempts"),
            ));
        }
        resumes_without_progress += 1;
        let delay = retry.unwrap_or(Duration::from_secs(1));
        tracing::debug!(id = %request.id, ?delay, "resuming the request's stream with Last-Event-ID");
        tokio::time::sleep(delay).await;
        events = match ctx.link.upstream.get(Some(&resume_from), false).await {
            Ok(resumed) if resumed.status().is_success() && is_event_stream(&resumed) => {
                sse::events(resumed, max)
            }
            Ok(resumed) if resumed.status() == StatusCode::NOT_FOUND => {
                return Err(lost(
                    request,
                    &format!(
                        "{ended}, and the upstream session expired before it could be resumed"
                    ),
                ));
            }
            Ok(resumed) => {
                return Err(lost(
                    request,
                    &format!(
                        "{ended}, and resuming it failed with HTTP {}",
                        resumed.status()
                    ),
                ));
            }
            Err(e) => {
                tracing::debug!(error = %describe_body_error(&e), "stream resumption failed; will retry");
                futures_util::stream::empty().boxed()
            }
        };
    }
}

/// Looks at one payload: the answer is returned; anything else goes where its owner says.
async fn take(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    payload: &[u8],
    owner: &mut Owner<'_, '_>,
) -> Result<Option<Vec<u8>>, Failure> {
    let aside = match owner {
        Owner::Host => {
            return Ok(match route(&ctx.gate, payload, Some(request.id)).await {
                Routed::Own(line) => Some(line),
                Routed::Other => None,
            });
        }
        Owner::Relay(aside) => aside,
    };
    let parsed = match message::parse(payload) {
        Ok(parsed) => parsed,
        Err(problem) => {
            tracing::warn!(
                ?problem,
                "dropped an upstream message that is not valid JSON-RPC"
            );
            return Ok(None);
        }
    };
    if parsed.kind == Kind::Response {
        return Ok(match parsed.id.and_then(IdKey::from_raw) {
            Some(id) if id == *request.id => Some(one_line(payload).into_owned()),
            None => parsed
                .error
                .map(|error| with_error_object(request.raw_id, error)),
            Some(other) => {
                tracing::warn!(id = %other, "dropped an upstream answer to a request that is not pending");
                None
            }
        });
    }
    match aside(&parsed, payload) {
        Aside::Host(line) => {
            ctx.gate.outbox().send(line).await;
        }
        Aside::Ignore => {}
        Aside::Upstream(answer) => ctx.link.deliver_aside(answer),
        Aside::Fail(failure, answer) => {
            if let Some(answer) = answer {
                ctx.link.deliver_aside(answer);
            }
            return Err(failure);
        }
    }
    Ok(None)
}

fn lost(request: &Outgoing<'_>, what: &str) -> Failure {
    let consequence = if request.replay_safe {
        "please retry"
    } else {
        "the request may have executed and was not repeated"
    };
    Failure::upstream(format!("{what}; {consequence}"))
}
