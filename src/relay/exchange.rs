//! One host request from POST to answer: JSON or SSE responses, stream resumption,
//! session recovery, and an error that says what happened when there is no answer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderMap};

use super::Relay;
use super::gate::Failure;
use super::methods::is_replay_safe;
use super::route::{Routed, route};
use super::transport::Transport;
use super::upstream::{Posted, requested_delay};
use crate::http::response::Response;
use crate::http::sse::{self, SseError, describe_body_error};
use crate::jsonrpc::message::{self, IdKey, Kind};

/// A request from the host, owned so its task can outlive the line buffer.
pub struct Call {
    pub id: IdKey,
    /// The id exactly as the host wrote it.
    pub raw_id: String,
    pub method: String,
    pub line: Bytes,
}

/// Serves one request; whatever happens, the gate gets an answer or an error for it.
pub async fn serve(relay: Arc<Relay>, call: Call) {
    if let Err(failure) = exchange(&relay, &call).await {
        relay.gate.fail(&call.id, &failure).await;
    }
}

async fn exchange(relay: &Arc<Relay>, call: &Call) -> Result<(), Failure> {
    if relay.transports.is_sse() {
        return super::sse_link::exchange(relay, call).await;
    }
    let is_initialize = call.method == "initialize";
    let replay_safe = is_replay_safe(&call.method);
    let mut recovered = false;
    loop {
        let posted = relay
            .upstream
            .post(call.line.clone(), is_initialize, replay_safe)
            .await?;
        let status = posted.response.status();
        if relay.transports.may_fall_back(status.as_u16()) {
            // `auto`: an HTTP+SSE server refuses the Streamable HTTP POST; its GET names an
            // endpoint.
            if super::sse_link::try_fall_back(relay).await {
                relay.transports.decide(
                    Transport::Sse,
                    &format!("the POST got HTTP {status} and the GET opened an HTTP+SSE stream"),
                );
                return super::sse_link::exchange(relay, call).await;
            }
            relay.transports.decide(
                Transport::StreamableHttp,
                &format!(
                    "the POST got HTTP {status}, and the server offers no HTTP+SSE stream either"
                ),
            );
        } else if status.is_success() {
            relay.transports.decide(
                Transport::StreamableHttp,
                "the server answered a Streamable HTTP POST",
            );
        }
        // 404 on a request that carried our session id: the upstream refused it without
        // running it, because it no longer knows the session. Start a new one and retry.
        if status == StatusCode::NOT_FOUND && posted.carried_session && !recovered {
            relay.upstream.reinitialize(posted.generation).await?;
            relay.restart_server_stream();
            recovered = true;
            continue;
        }
        return answer(relay, call, posted).await;
    }
}

async fn answer(relay: &Relay, call: &Call, posted: Posted) -> Result<(), Failure> {
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
        return read_stream(relay, call, response, &headers).await;
    }
    let retry_after = requested_delay(&response);
    let body = read_capped(response, relay.upstream.max_message_size()).await?;
    if status.is_success() {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(Failure::upstream(format!(
                "HTTP {status} from upstream with an empty body"
            )));
        }
        return match route(&relay.gate, &body, Some(&call.id)).await {
            Routed::Own(line) => {
                finish(relay, call, &headers, line).await;
                Ok(())
            }
            Routed::Other => Err(Failure::upstream(format!(
                "HTTP {status} from upstream without an answer to this request"
            ))),
        };
    }
    // An error status. A JSON-RPC error in the body is the most precise answer there is.
    if super::passthrough::error_code(&body) == Some(crate::era::UNSUPPORTED_PROTOCOL_VERSION) {
        relay.eras.proven_wrong(
            crate::era::Era::Legacy,
            "a -32022 answer to a handshake-era request",
        );
    }
    if is_jsonrpc_error(&body)
        && let Routed::Own(line) = route(&relay.gate, &body, Some(&call.id)).await
    {
        finish(relay, call, &headers, line).await;
        return Ok(());
    }
    Err(status_failure(status, retry_after))
}

/// Delivers the request's own answer; an `initialize` answer first sets up the session.
async fn finish(relay: &Relay, call: &Call, headers: &HeaderMap, line: Vec<u8>) {
    if line.is_empty() {
        return; // already delivered (an id-null error rewritten to the host's id)
    }
    if call.method == "initialize" {
        relay.upstream.adopt_initialize(headers, &line);
    }
    relay.gate.deliver(&call.id, line).await;
}

/// Reads the request's SSE stream, passing everything else through as it arrives, and
/// resumes it with GET + Last-Event-ID when it breaks before the answer came.
async fn read_stream(
    relay: &Relay,
    call: &Call,
    response: Response,
    headers: &HeaderMap,
) -> Result<(), Failure> {
    let max = relay.upstream.max_message_size();
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
                        route(&relay.gate, data.as_bytes(), Some(&call.id)).await
                    {
                        finish(relay, call, headers, line).await;
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
        if resumes_without_progress >= relay.config.max_reconnects {
            return Err(Failure::upstream(format!(
                "{ended}; gave up after {} resumption attempts",
                relay.config.max_reconnects
            )));
        }
        resumes_without_progress += 1;
        let delay = retry.unwrap_or(Duration::from_secs(1));
        tracing::debug!(id = %call.id, ?delay, "resuming the request's stream with Last-Event-ID");
        tokio::time::sleep(delay).await;
        events = match relay.upstream.get(Some(&resume_from), false).await {
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

pub(super) fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

pub(super) fn is_jsonrpc_error(body: &[u8]) -> bool {
    message::parse(body).is_ok_and(|m| m.kind == Kind::Response && m.error.is_some())
}

/// Reads a whole body, refusing to hold more than `max` bytes.
pub async fn read_capped(mut response: Response, max: usize) -> Result<Vec<u8>, Failure> {
    let announced = response.content_length().unwrap_or(0);
    if announced > max as u64 {
        return Err(too_large(max));
    }
    let mut body = Vec::with_capacity(announced as usize);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| Failure::upstream(describe_body_error(&e)))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_large(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_large(max: usize) -> Failure {
    Failure::upstream(format!(
        "the upstream answer exceeds --max-message-size ({max} bytes)"
    ))
}

/// The error for an HTTP status that came without a JSON-RPC answer.
pub(super) fn status_failure(status: StatusCode, retry_after: Option<Duration>) -> Failure {
    let code = status.as_u16();
    let message = match code {
        401 => "HTTP 401 from upstream: the server requires authorization; pass --bearer-token (or MCP_BEARER_TOKEN) or -H 'Authorization: ...'".to_owned(),
        403 => "HTTP 403 from upstream: the credentials were refused for this server or operation".to_owned(),
        404 => "HTTP 404 from upstream: no MCP endpoint at this URL".to_owned(),
        429 | 503 => match retry_after {
            Some(delay) => format!("HTTP {code} from upstream: busy, retry after {} s", delay.as_secs()),
            None => format!("HTTP {code} from upstream: busy, retry later"),
        },
        300..=399 => format!("HTTP {code} from upstream: redirects are followed only for 307/308 on the same origin"),
        _ => format!("HTTP {code} from upstream"),
    };
    let mut data = serde_json::json!({ "httpStatus": code });
    if let Some(delay) = retry_after {
        data["retryAfter"] = delay.as_secs().into();
    }
    Failure::upstream(message).with_data(data)
}
