//! The response kit every part of serve answers with: JSON bodies and JSON-RPC errors,
//! plain text, and the one SSE body builder all three streams use (the session's GET
//! stream, a request's stream, a `subscriptions/listen`), so keepalive and shutdown behave
//! the same everywhere.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};
use tokio_util::sync::CancellationToken;

use super::backend::Undeliverable;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST, error_response};

const KEEPALIVE: Bytes = Bytes::from_static(b": keepalive\n\n");

/// How a stream behaves when it is quiet and when the gateway shuts down.
pub struct SseTiming {
    /// A `: keepalive` comment after this long without an event.
    pub keepalive: Duration,
    /// Fired when the gateway begins shutting down.
    pub closing: CancellationToken,
}

/// An SSE response whose events come from `source` (each item one or more framed events),
/// with `: keepalive` comments in the quiet (`at_keepalive` runs at each) and, when the
/// gateway shuts down, `farewell` as the last event if given, else the end.
pub fn sse_body(
    source: impl Stream<Item = Bytes> + Send + 'static,
    timing: SseTiming,
    at_keepalive: impl Fn() + Send + Sync + 'static,
    farewell: Option<Bytes>,
) -> Response<Body> {
    let at_keepalive = Arc::new(at_keepalive);
    let SseTiming { keepalive, closing } = timing;
    let state = (source.boxed(), false);
    let stream = futures_util::stream::unfold(state, move |(mut source, ended)| {
        let closing = closing.clone();
        let at_keepalive = at_keepalive.clone();
        let farewell = farewell.clone();
        async move {
            if ended {
                return None;
            }
            // Events already waiting go out before a shutdown is noticed.
            let chunk = tokio::select! {
                biased;
                chunk = source.next() => chunk?,
                _ = closing.cancelled() => {
                    return farewell.map(|last| (Ok::<_, std::convert::Infallible>(last), (source, true)));
                }
                _ = tokio::time::sleep(keepalive) => {
                    at_keepalive();
                    KEEPALIVE
                }
            };
            Some((Ok(chunk), (source, false)))
        }
    });
    sse(Body::from_stream(stream))
}

/// One message as an SSE `message` event, numbered when the stream is resumable.
pub fn sse_event(id: Option<u64>, line: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(line.len() + 32);
    event.extend_from_slice(b"event: message\n");
    if let Some(id) = id {
        event.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(line);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

fn sse(body: Body) -> Response<Body> {
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(body)
        .expect("a valid response")
}

pub fn json(status: StatusCode, line: Bytes) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(line))
        .expect("a valid response")
}

pub fn json_error(status: StatusCode, id: &str, code: i64, message: &str) -> Response<Body> {
    json(status, Bytes::from(error_response(id, code, message, None)))
}

pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "text/plain")
        .body(Body::from(body))
        .expect("a valid response")
}

/// What `/readyz` says, whoever answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// A replica drains after SIGTERM: open sessions go on, new ones go elsewhere.
    Draining,
    ShuttingDown,
    /// Every `--max-sessions` slot is taken.
    Full,
}

/// The `/readyz` answer: 200 when ready, 503 with the reason otherwise.
pub fn readyz(readiness: Readiness) -> Response<Body> {
    match readiness {
        Readiness::Ready => text(StatusCode::OK, "ready\n"),
        Readiness::Draining => text(StatusCode::SERVICE_UNAVAILABLE, "draining\n"),
        Readiness::ShuttingDown => text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
        Readiness::Full => text(StatusCode::SERVICE_UNAVAILABLE, "at --max-sessions\n"),
    }
}

pub fn empty(status: StatusCode) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Body::empty())
        .expect("a valid response")
}

pub fn too_large(max: usize) -> Response<Body> {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "null",
        INVALID_REQUEST,
        &format!("Payload Too Large: the body exceeds --max-message-size ({max} bytes)"),
    )
}

/// The answer when a message could not be handed to the child: 404 if it is gone (the
/// session is over), 503 if it has stopped reading its input.
pub fn undeliverable_response(
    response_timeout: Duration,
    child_queue: usize,
    raw_id: &str,
    undeliverable: &Undeliverable,
) -> Response<Body> {
    match undeliverable {
        Undeliverable::Gone => json_error(
            StatusCode::NOT_FOUND,
            raw_id,
            INVALID_REQUEST,
            "Session not found: its server process has exited",
        ),
        Undeliverable::Full => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            raw_id,
            INTERNAL_ERROR,
            &format!(
                "Service Unavailable: the MCP server has not read its input for {} s; --child-queue ({}) messages are waiting",
                response_timeout.as_secs_f64(),
                child_queue
            ),
        ),
    }
}

pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A message as one line for the child's stdin.
pub fn compact(body: &Bytes) -> Bytes {
    match crate::jsonrpc::framing::one_line(body) {
        std::borrow::Cow::Borrowed(_) => body.clone(),
        std::borrow::Cow::Owned(line) => Bytes::from(line),
    }
}
