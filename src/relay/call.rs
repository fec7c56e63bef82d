//! One request sent upstream by the relay on someone's behalf (translated, or its own) and
//! its answer read back, JSON or SSE. What else arrives on the request's stream is handed
//! to the caller, who decides whether the host sees it.

use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;

use crate::http::sse::{self, SseError};
use crate::jsonrpc::error::with_error_object;
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message::{self, IdKey, Kind, Message};
use crate::relay::context::Ctx;
use crate::relay::gate::Failure;
use crate::relay::link::response::{
    is_event_stream, is_jsonrpc_error, read_capped, requested_delay, status_failure,
};
use crate::relay::link::session::Wire;

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

/// Sends `request` and returns the line that answers it (carrying the request's own id).
pub async fn call(
    ctx: &Ctx,
    request: Outgoing<'_>,
    aside: &mut AsideFn<'_>,
) -> Result<Vec<u8>, Failure> {
    let mut recovered = false;
    loop {
        let posted = ctx
            .link
            .upstream
            .post_as(request.body.clone(), &request.wire, request.replay_safe)
            .await?;
        let status = posted.response.status();
        if status == StatusCode::NOT_FOUND && posted.carried_session && !recovered {
            ctx.link.upstream.reinitialize(posted.generation).await?;
            ctx.restart_server_stream();
            recovered = true;
            continue;
        }
        let response = posted.response;
        if status == StatusCode::ACCEPTED {
            return Err(Failure::upstream(
                "HTTP 202 from upstream: the server accepted the request but sent no answer",
            )
            .with_data(serde_json::json!({ "httpStatus": 202 })));
        }
        let max = ctx.link.upstream.max_message_size();
        if status.is_success() && is_event_stream(&response) {
            return read_stream(ctx, &request, response, aside).await;
        }
        let retry_after = requested_delay(&response);
        let body = read_capped(response, max).await?;
        if status.is_success() || is_jsonrpc_error(&body) {
            if let Some(answer) = take(ctx, &request, &body, aside).await? {
                return Ok(answer);
            }
            if status.is_success() {
                return Err(Failure::upstream(format!(
                    "HTTP {status} from upstream without an answer to this request"
                )));
            }
        }
        if matches!(request.wire, Wire::Modern { .. }) && matches!(status.as_u16(), 400 | 404 | 405)
        {
            ctx.eras.proven_wrong(
                crate::era::Era::Modern,
                &format!("HTTP {status} without a JSON-RPC answer to a 2026-07-28 request"),
            );
        }
        return Err(status_failure(status, retry_after));
    }
}

/// Reads the request's SSE stream to its answer. A legacy stream that breaks after the
/// server numbered its events is resumed with GET and `Last-Event-ID` (after the server's
/// `retry:` delay), as the relay core does; a 2026-07-28 stream cannot be resumed.
async fn read_stream(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    response: crate::http::response::Response,
    aside: &mut AsideFn<'_>,
) -> Result<Vec<u8>, Failure> {
    let max = ctx.link.upstream.max_message_size();
    let resumable = matches!(request.wire, Wire::Legacy { .. });
    let mut events = sse::events(response, max);
    let mut last_event_id: Option<String> = None;
    let mut retry = None;
    let mut attempts = 0;
    loop {
        let ended = loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(SseError::TooLarge(max))) => {
                    return Err(Failure::upstream(format!(
                        "the upstream answer exceeds --max-message-size ({max} bytes)"
                    )));
                }
                Some(Err(e)) => break format!("the stream broke: {e}"),
                None => break "the stream ended before the answer".to_owned(),
            };
            if event.id.is_some() {
                last_event_id = event.id;
                attempts = 0;
            }
            if let Some(ms) = event.retry_ms {
                retry = Some(std::time::Duration::from_millis(ms));
            }
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            if let Some(answer) = take(ctx, request, data.as_bytes(), aside).await? {
                return Ok(answer);
            }
        };
        let Some(resume_from) = last_event_id.clone().filter(|_| resumable) else {
            return Err(lost(request, &ended));
        };
        if attempts >= ctx.config.max_reconnects {
            return Err(lost(
                request,
                &format!("{ended}; gave up after {attempts} resumption attempts"),
            ));
        }
        attempts += 1;
        tokio::time::sleep(retry.unwrap_or(std::time::Duration::from_secs(1))).await;
        events = match ctx.link.upstream.get(Some(&resume_from), false).await {
            Ok(resumed) if resumed.status().is_success() && is_event_stream(&resumed) => {
                sse::events(resumed, max)
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
            Err(_) => futures_util::stream::empty().boxed(),
        };
    }
}

/// Looks at one payload: the answer is returned; anything else goes to `aside`.
async fn take(
    ctx: &Ctx,
    request: &Outgoing<'_>,
    payload: &[u8],
    aside: &mut AsideFn<'_>,
) -> Result<Option<Vec<u8>>, Failure> {
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
