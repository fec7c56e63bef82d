//! Reading an upstream response, the same way on every path: a body under
//! `--max-message-size`, whether it is an event stream, what `Retry-After` asks for, and
//! the error for a status that came without a JSON-RPC answer.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use http::StatusCode;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;

use crate::http::response::Response;
use crate::http::retry_after;
use crate::http::sse::{self, describe_body_error};
use crate::jsonrpc::message::{self, Kind};
use crate::relay::gate::Failure;

pub fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

pub fn is_jsonrpc_error(body: &[u8]) -> bool {
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
pub fn status_failure(status: StatusCode, retry_after: Option<Duration>) -> Failure {
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

/// The delay a 429/503 asks for in `Retry-After`, if it gave a valid one.
pub fn requested_delay(response: &Response) -> Option<Duration> {
    let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?;
    retry_after::parse(value, SystemTime::now())
}

/// Reads a whole response (JSON or SSE) and returns the first JSON-RPC response in it.
/// Used only for the relay's own requests, whose answers never reach the host.
pub async fn read_first_answer(response: Response, max: usize) -> Result<Vec<u8>, String> {
    if !is_event_stream(&response) {
        let body = read_capped(response, max).await.map_err(|e| e.message)?;
        return Ok(body);
    }
    let mut events = sse::events(response, max);
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| e.to_string())?;
        if let Some(data) = event.data.filter(|d| !d.is_empty())
            && message::parse(data.as_bytes()).is_ok_and(|m| m.kind == Kind::Response)
        {
            return Ok(data.into_bytes());
        }
    }
    Err("the stream ended without an answer".into())
}

/// The error code of an answer line, if it is an error.
pub fn error_code(answer: &[u8]) -> Option<i64> {
    let answer: Value = serde_json::from_slice(answer).ok()?;
    answer.get("error")?.get("code")?.as_i64()
}
