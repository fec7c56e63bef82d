//! One host request from POST to answer: JSON or SSE responses, stream resumption,
//! session recovery, and an error that says what happened when there is no answer.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use http::StatusCode;
use http::header::HeaderMap;

use crate::http::response::Response;
use crate::http::sse::{self, SseError, describe_body_error};
use crate::relay::context::Ctx;
use crate::relay::gate::Failure;
use crate::relay::link::response::{
    is_event_stream, is_jsonrpc_error, read_capped, requested_delay, status_failure,
};
use crate::relay::link::session::Posted;
use crate::relay::link::sse as sse_link;
use crate::relay::link::transport::Transport;
use crate::relay::methods::is_replay_safe;
use crate::relay::request::Call;
use crate::relay::route::{Routed, route};

/// Serves one request; whatever happens, the gate gets an answer or an error for it.
pub async fn serve(ctx: Arc<Ctx>, call: Call) {
    if let Err(failure) = exchange(&ctx, &call).await {
        ctx.gate.fail(&call.id, &failure).await;
    }
}

async fn exchange(ctx: &Arc<Ctx>, call: &Call) -> Result<(), Failure> {
    if ctx.link.transports.is_sse() {
        return sse_link::exchange(&ctx.link, call).await;
    }
    let is_initialize = call.method == "initialize";
    let replay_safe = is_replay_safe(&call.method);
    let mut recovered = false;
    loop {
        let posted = ctx
            .link
            .upstream
            .post(call.line.clone(), is_initialize, replay_safe)
            .await?;
        let status = posted.response.status();
        if ctx.link.transports.may_fall_back(status.as_u16()) {
            // `auto`: an HTTP+SSE server refuses the Streamable HTTP POST; its GET names an
            // endpoint.
            if sse_link::try_fall_back(&ctx.link).await {
                ctx.link.transports.decide(
                    Transport::Sse,
                    &format!("the POST got HTTP {status} and the GET opened an HTTP+SSE stream"),
                );
                return sse_link::exchange(&ctx.link, call).await;
            }
            ctx.link.transports.decide(
                Transport::StreamableHttp,
                &format!(
                    "the POST got HTTP {status}, and the server offers no HTTP+SSE stream either"
                ),
            );
        } else if status.is_success() {
            ctx.link.transports.decide(
                Transport::StreamableHttp,
                "the server answered a Streamable HTTP POST",
            );
        }
        // 404 on a request that carried our session id: the upstream refused it without
        // running it, because it no longer knows the session. Start a new one and retry.
        if status == StatusCode::NOT_FOUND && posted.carried_session && !recovered {
            ctx.link.upstream.reinitialize(posted.generation).await?;
            ctx.restart_server_stream();
            recovered = true;
            continue;
        }
        return answer(ctx, call, posted).await;
    }
}

async fn answer(ctx: &Ctx, call: &Call, posted: Posted) -> Result<(), Failure> {
    let response = posted.response;
    let status = response.status();
    if status == StatusCode::ACCEPTED {
        return Err(Failure::upstream(
            "HTTP 202 from upstream: the server accepted the request but sent no answer",
        )
        .with_data(serde_json::json!({ "httpStatus": 202 })));
    }
    // Only an `initialize` answer needs the response headers (the session id) later.
    let headers = if call.method == "initialize" {
        response.headers().clone()
    } else {
        HeaderMap::new()
    };
    if status.is_success() && is_event_stream(&response) {
        return read_stream(ctx, call, response, &headers).await;
    }
    let retry_after = requested_delay(&response);
    let body = read_capped(response, ctx.link.upstream.max_message_size()).await?;
    if status.is_success() {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(Failure::upstream(format!(
                "HTTP {status} from upstream with an empty body"
            )));
        }
        return match route(&ctx.gate, &body, Some(&call.id)).await {
            Routed::Own(line) => {
                finish(ctx, call, &headers, line).await;
                Ok(())
            }
            Routed::Other => Err(Failure::upstream(format!(
                "HTTP {status} from upstream without an answer to this request"
            ))),
        };
    }
    // An error status. A JSON-RPC error in the body is the most precise answer there is.
    if crate::relay::link::response::error_code(&body)
        == Some(crate::era::UNSUPPORTED_PROTOCOL_VERSION)
    {
        ctx.eras.proven_wrong(
            crate::era::Era::Legacy,
            "a -32022 answer to a handshake-era request",
        );
    }
    if is_jsonrpc_error(&body)
        && let Routed::Own(line) = route(&ctx.gate, &body, Some(&call.id)).await
    {
        finish(ctx, call, &headers, line).await;
        return Ok(());
    }
    Err(status_failure(status, retry_after))
}

/// Delivers the request's own answer; an `initialize` answer first sets up the session.
async fn finish(ctx: &Ctx, call: &Call, headers: &HeaderMap, line: Vec<u8>) {
    if line.is_empty() {
        return; // already delivered (an id-null error rewritten to the host's id)
    }
    if call.method == "initialize" {
        ctx.link.upstream.adopt_initialize(headers, &line);
    }
    ctx.gate.deliver(&call.id, line).await;
}

/// Reads the request's SSE stream, passing everything else through as it arrives, and
/// resumes it with GET + Last-Event-ID when it breaks before the answer came.
async fn read_stream(
    ctx: &Ctx,
    call: &Call,
    response: Response,
    headers: &HeaderMap,
) -> Result<(), Failure> {
    let max = ctx.link.upstream.max_message_size();
    let mut events = sse::events(response, max);
    let mut last_event_id: Option<String> = None;
    let mut retry = None;
    let mut resumes_without_progress = 0;
    loop {
        let ended = loop {
            match events.next().await {
                Some(Ok(event)) => {
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
                    if let Routed::Own(line) =
                        route(&ctx.gate, data.as_bytes(), Some(&call.id)).await
                    {
                        finish(ctx, call, headers, line).await;
                        return Ok(());
                    }
                }
                Some(Err(SseError::TooLarge(max))) => {
                    return Err(Failure::upstream(format!(
                        "the upstream answer exceeds --max-message-size ({max} bytes)"
                    )));
                }
                Some(Err(e)) => break format!("upstream stream interrupted: {e}"),
                None => break "upstream closed the stream before answering".to_owned(),
            }
        };
        // Resumable only if the server numbered its events (2025-11-25 priming ids).
        let Some(resume_from) = last_event_id.clone() else {
            return Err(Failure::upstream(ended));
        };
        if resumes_without_progress >= ctx.config.max_reconnects {
            return Err(Failure::upstream(format!(
                "{ended}; gave up after {} resumption attempts",
                ctx.config.max_reconnects
            )));
        }
        resumes_without_progress += 1;
        let delay = retry.unwrap_or(Duration::from_secs(1));
        tracing::debug!(id = %call.id, ?delay, "resuming the request's stream with Last-Event-ID");
        tokio::time::sleep(delay).await;
        events = match ctx.link.upstream.get(Some(&resume_from), false).await {
            Ok(resumed) if resumed.status().is_success() && is_event_stream(&resumed) => {
                sse::events(resumed, max)
            }
            Ok(resumed) if resumed.status() == StatusCode::NOT_FOUND => {
                return Err(Failure::upstream(format!(
                    "{ended}, and the upstream session expired before it could be resumed; {}",
                    if is_replay_safe(&call.method) {
                        "please retry"
                    } else {
                        "the request may have executed and was not replayed"
                    }
                )));
            }
            Ok(resumed) => {
                return Err(Failure::upstream(format!(
                    "{ended}, and resuming it failed with HTTP {}",
                    resumed.status()
                )));
            }
            Err(e) => {
                tracing::debug!(error = %describe_body_error(&e), "stream resumption failed; will retry");
                futures_util::stream::empty().boxed()
            }
        };
    }
}
