//! A handshake-era request's trace context for its stdio server, which sees no HTTP
//! headers: what `crate::trace_context::with_trace` splices into `params._meta`.

use http::HeaderMap;

use super::responses::header;
use crate::jsonrpc::message::Message;
use crate::trace_context::TraceContext;

/// The context to write: this gateway's span when OpenTelemetry is on (the stdio server's
/// spans are its children), else the HTTP headers' when `params` name none; `None` when
/// `_meta` already carries the client's and there is no span of ours, or nothing does.
pub fn trace_from(headers: &HeaderMap, parsed: &Message<'_>) -> Option<TraceContext> {
    let in_params = parsed
        .params
        .is_some_and(|p| memchr::memmem::find(p.get().as_bytes(), b"traceparent").is_some());
    let from_headers = if in_params {
        None
    } else {
        TraceContext::from_headers(|name| header(headers, name))
    };
    crate::telemetry::outgoing(from_headers.as_ref()).or(from_headers)
}
