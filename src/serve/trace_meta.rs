//! A handshake-era request's trace context for its stdio server, which sees no HTTP
//! headers: the `traceparent` (and `tracestate`, `baggage`) header written into
//! `params._meta` by splicing the request's own bytes, so nothing else of it changes (a
//! re-serialized request could round a large number, or turn an id `1e3` into `1000.0`
//! whose answer would then match nothing).

use std::borrow::Cow;
use std::collections::HashMap;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::value::RawValue;

use super::responses::header;
use crate::jsonrpc::message::Message;
use crate::trace_context::TraceContext;

/// The trace context of the request's HTTP headers when its `params` name none; `None`
/// when they do (`_meta` wins) or nothing does.
pub fn trace_from(headers: &HeaderMap, parsed: &Message<'_>) -> Option<TraceContext> {
    let in_params = parsed
        .params
        .is_some_and(|p| memchr::memmem::find(p.get().as_bytes(), b"traceparent").is_some());
    if in_params {
        return None;
    }
    TraceContext::from_headers(|name| header(headers, name))
}

/// `body` with `trace` spliced into `params._meta` (`params` is the request's, borrowed
/// from `body`); `None` when it cannot be (no params, params not an object).
pub fn with_trace(body: &Bytes, params: Option<&RawValue>, trace: &TraceContext) -> Option<Bytes> {
    let params = params?;
    let offset = |raw: &str| {
        let at = (raw.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
        (at + raw.len() <= body.len()).then_some(at)
    };
    let members: HashMap<Cow<'_, str>, &RawValue> = serde_json::from_str(params.get()).ok()?;
    let entries = trace
        .headers()
        .iter()
        .map(|(key, value)| format!("\"{key}\":{}", serde_json::Value::from(*value)))
        .collect::<Vec<_>>()
        .join(",");
    let (at, insert) = match members.get("_meta") {
        Some(meta) => {
            let text = meta.get();
            let brace = text.find('{').filter(|b| text[..*b].trim().is_empty())?;
            let empty = text[brace + 1..].trim_start().starts_with('}');
            let comma = if empty { "" } else { "," };
            (offset(text)? + brace + 1, format!("{entries}{comma}"))
        }
        None => {
            let text = params.get();
            let brace = text.find('{').filter(|b| text[..*b].trim().is_empty())?;
            let comma = if members.is_empty() { "" } else { "," };
            (
                offset(text)? + brace + 1,
                format!("\"_meta\":{{{entries}}}{comma}"),
            )
        }
    };
    let mut spliced = Vec::with_capacity(body.len() + insert.len());
    spliced.extend_from_slice(&body[..at]);
    spliced.extend_from_slice(insert.as_bytes());
    spliced.extend_from_slice(&body[at..]);
    Some(Bytes::from(spliced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::message::parse;
    use serde_json::{Value, json};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn spliced(body: &str) -> Value {
        let body = Bytes::from(body.to_owned());
        let parsed = parse(&body).unwrap();
        let trace = TraceContext::from_headers(|n| (n == "traceparent").then_some(PARENT)).unwrap();
        let out = with_trace(&body, parsed.params, &trace).expect("spliced");
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn the_trace_goes_into_meta_and_nothing_else_changes() {
        let out = spliced(
            r#"{"jsonrpc":"2.0","id":1e3,"method":"tools/call","params":{"name":"x","arguments":{"n":123456789012345678901234567890}}}"#,
        );
        assert_eq!(out["params"]["_meta"]["traceparent"], PARENT);
        assert_eq!(out["params"]["name"], "x");
        let kept = r#"{"jsonrpc":"2.0","id":1e3,"method":"m","params":{"a":1e3}}"#;
        let body = Bytes::from(kept);
        let parsed = parse(&body).unwrap();
        let trace = TraceContext::from_headers(|n| (n == "traceparent").then_some(PARENT)).unwrap();
        let out = with_trace(&body, parsed.params, &trace).unwrap();
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(
            text.contains(r#""id":1e3"#) && text.contains(r#""a":1e3"#),
            "{text}"
        );
    }

    #[test]
    fn an_existing_meta_keeps_its_keys_and_empty_objects_stay_valid() {
        let out = spliced(
            r#"{"jsonrpc":"2.0","id":2,"method":"m","params":{"_meta":{"progressToken":7},"name":"x"}}"#,
        );
        assert_eq!(
            out["params"]["_meta"],
            json!({"traceparent": PARENT, "progressToken": 7})
        );
        let out = spliced(r#"{"jsonrpc":"2.0","id":3,"method":"m","params":{ }}"#);
        assert_eq!(out["params"], json!({"_meta": {"traceparent": PARENT}}));
        let out = spliced(r#"{"jsonrpc":"2.0","id":4,"method":"m","params":{"_meta":{}}}"#);
        assert_eq!(out["params"]["_meta"], json!({"traceparent": PARENT}));
    }
}
