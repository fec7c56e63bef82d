//! A JSON-RPC request's trace context written into its `params._meta` by splicing the
//! request's own bytes, so nothing else of it changes (a re-serialized request could round
//! a large number, or turn an id `1e3` into `1000.0` whose answer would then match nothing).

use std::borrow::Cow;
use std::collections::HashMap;

use bytes::Bytes;
use serde_json::value::RawValue;

use super::TraceContext;

/// `body` with `trace` spliced into `params._meta` (`params` is the request's, borrowed
/// from `body`): a `traceparent` already there is replaced (this hop's span is the next
/// one's parent), the other keys are added only where missing. `None` when it cannot be
/// (no params, params not an object).
pub fn with_trace(body: &Bytes, params: Option<&RawValue>, trace: &TraceContext) -> Option<Bytes> {
    let params = params?;
    let offset = |raw: &str| {
        let at = (raw.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
        (at + raw.len() <= body.len()).then_some(at)
    };
    let members: HashMap<Cow<'_, str>, &RawValue> = serde_json::from_str(params.get()).ok()?;
    let quoted = |value: &str| serde_json::Value::from(value).to_string();
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    match members.get("_meta") {
        Some(meta) => {
            let inner: HashMap<Cow<'_, str>, &RawValue> = serde_json::from_str(meta.get()).ok()?;
            let entries = trace
                .headers()
                .iter()
                .filter(|(key, _)| !inner.contains_key(*key))
                .map(|(key, value)| format!("\"{key}\":{}", quoted(value)))
                .collect::<Vec<_>>()
                .join(",");
            if let Some(old) = inner.get("traceparent") {
                let at = offset(old.get())?;
                edits.push((at, at + old.get().len(), quoted(&trace.traceparent)));
            }
            if !entries.is_empty() {
                let text = meta.get();
                let brace = text.find('{').filter(|b| text[..*b].trim().is_empty())?;
                let comma = if inner.is_empty() { "" } else { "," };
                let at = offset(text)? + brace + 1;
                edits.push((at, at, format!("{entries}{comma}")));
            }
        }
        None => {
            let entries = trace
                .headers()
                .iter()
                .map(|(key, value)| format!("\"{key}\":{}", quoted(value)))
                .collect::<Vec<_>>()
                .join(",");
            let text = params.get();
            let brace = text.find('{').filter(|b| text[..*b].trim().is_empty())?;
            let comma = if members.is_empty() { "" } else { "," };
            let at = offset(text)? + brace + 1;
            edits.push((at, at, format!("\"_meta\":{{{entries}}}{comma}")));
        }
    }
    // Applied back to front, so each edit's offsets still hold.
    edits.sort_by_key(|(from, _, _)| std::cmp::Reverse(*from));
    let mut spliced = body.to_vec();
    for (from, to, text) in edits {
        spliced.splice(from..to, text.into_bytes());
    }
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

    #[test]
    fn a_traceparent_there_is_replaced_and_the_rest_kept() {
        let out = spliced(
            r#"{"jsonrpc":"2.0","id":5,"method":"m","params":{"_meta":{"traceparent":"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-00f067aa0ba902b7-01","tracestate":"k=v"},"name":"x"}}"#,
        );
        assert_eq!(
            out["params"]["_meta"],
            json!({"traceparent": PARENT, "tracestate": "k=v"})
        );
        assert_eq!(out["params"]["name"], "x");
    }
}
