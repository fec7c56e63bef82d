//! SSE decoding over a response body (sse-stream does the parsing), with what MCP needs on
//! top: a per-event size cap, and the event id and `retry:` of every block, id-only
//! priming blocks included.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sse_stream::SseByteStream;

use super::response::{HttpError, Response};

/// One decoded SSE block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    pub id: Option<String>,
    pub retry_ms: Option<u64>,
    /// The `event:` name (`None` means `message`); the 2024-11-05 transport's first event
    /// is `endpoint`.
    pub event: Option<String>,
    /// The joined `data:` lines; `None` for a block without data (a priming event).
    pub data: Option<String>,
}

/// Why an SSE stream ended early.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("an SSE event exceeds --max-message-size ({0} bytes)")]
    TooLarge(usize),
    #[error("{0}")]
    Body(String),
    #[error("no data for {0} s")]
    Idle(u64),
}

/// A byte-stream error carrying the reason, so sse-stream can pass it through.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ByteError(String);

/// A stream of events from a response, capped at `max_event` bytes per event.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event, SseError>> + Send>>;

/// Decodes `response`'s body. The cap counts the bytes read since the last event was
/// completed, so it bounds each event (plus at most one read) and never accumulates over
/// a long-lived stream.
pub fn events(response: Response, max_event: usize) -> EventStream {
    decode(response.bytes_stream(), max_event)
}

/// Decodes a body given as its chunks (what `events` does to a response; the fuzz target
/// feeds it directly).
pub fn decode(
    chunks: impl Stream<Item = Result<Bytes, HttpError>> + Send + 'static,
    max_event: usize,
) -> EventStream {
    let since_last_event = Arc::new(AtomicUsize::new(0));
    let counter = since_last_event.clone();
    let bytes = chunks.map(move |chunk| -> Result<Bytes, ByteError> {
        let chunk = chunk.map_err(|e| ByteError(describe_body_error(&e)))?;
        let seen = counter.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
        if seen > max_event.saturating_add(64 * 1024) {
            return Err(ByteError(SseError::TooLarge(max_event).to_string()));
        }
        Ok(chunk)
    });
    let stream = SseByteStream::new(bytes).map(move |item| match item {
        Ok(sse) => {
            since_last_event.store(0, Ordering::Relaxed);
            if sse.data.as_ref().is_some_and(|d| d.len() > max_event) {
                return Err(SseError::TooLarge(max_event));
            }
            Ok(Event {
                id: sse.id,
                retry_ms: sse.retry,
                event: sse.event,
                data: sse.data,
            })
        }
        Err(sse_stream::Error::Body(e)) => Err(match e.to_string() {
            s if s == SseError::TooLarge(max_event).to_string() => SseError::TooLarge(max_event),
            s => SseError::Body(s),
        }),
        Err(e) => Err(SseError::Body(e.to_string())),
    });
    Box::pin(stream)
}

/// Names a body read failure the way a user can act on it.
pub fn describe_body_error(e: &HttpError) -> String {
    if e.is_timeout() {
        "the upstream sent nothing for longer than the read timeout (--timeout-read; --sse-read-timeout on a long-lived stream)".into()
    } else {
        format!("the connection to the upstream broke ({})", root_cause(e))
    }
}

/// The innermost error message: the outer layers' text is often just "the connection failed".
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut current = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}
