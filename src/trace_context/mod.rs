//! W3C trace context as MCP carries it (SEP-414): `traceparent`, `tracestate` and
//! `baggage` in a request's `params._meta`, or as HTTP headers. Read from either (`_meta`
//! wins when both are present, as Envoy reads them) and written into the other where a hop
//! cannot see the first: a stdio server sees no HTTP headers, a proxy in front of a remote
//! server may see only them. Pure: no I/O.

mod splice;

use serde_json::{Map, Value};

pub use splice::with_trace;

/// The trace context keys, in `_meta` and as header names alike.
pub const KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];

/// The longest `tracestate` passed on (W3C: 32 members of at most 512 characters in all
/// is what a vendor may rely on).
const MAX_TRACESTATE: usize = 512;
/// The longest `baggage` passed on (W3C: 8192 bytes).
const MAX_BAGGAGE: usize = 8192;

/// One request's trace context: `traceparent` (checked), and what travels with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: Option<String>,
    pub baggage: Option<String>,
}

impl TraceContext {
    /// From `params._meta` (a `traceparent` that is not one is no context).
    pub fn from_meta(params: &Value) -> Option<TraceContext> {
        let meta = params.get("_meta")?;
        let text = |key: &str| meta.get(key).and_then(Value::as_str);
        let traceparent = text("traceparent").filter(|t| trace_id(t).is_some())?;
        Some(TraceContext::checked(
            traceparent,
            text("tracestate"),
            text("baggage"),
        ))
    }

    /// From its parts, if `traceparent` is one.
    pub fn from_parts(
        traceparent: &str,
        tracestate: Option<&str>,
        baggage: Option<&str>,
    ) -> Option<TraceContext> {
        trace_id(traceparent)?;
        Some(TraceContext::checked(traceparent, tracestate, baggage))
    }

    /// From HTTP headers, read by `header`.
    pub fn from_headers<'h>(header: impl Fn(&str) -> Option<&'h str>) -> Option<TraceContext> {
        let traceparent = header("traceparent").filter(|t| trace_id(t).is_some())?;
        Some(TraceContext::checked(
            traceparent,
            header("tracestate"),
            header("baggage"),
        ))
    }

    /// A context from a `traceparent` that passed `trace_id` (kept trimmed, so it is the
    /// 55 ASCII characters the trace id is sliced from) and what travels with it, each
    /// dropped past the W3C limits.
    fn checked(traceparent: &str, tracestate: Option<&str>, baggage: Option<&str>) -> Self {
        TraceContext {
            traceparent: traceparent.trim().to_owned(),
            tracestate: tracestate
                .filter(|s| s.len() <= MAX_TRACESTATE)
                .map(str::to_owned),
            baggage: baggage
                .filter(|b| b.len() <= MAX_BAGGAGE)
                .map(str::to_owned),
        }
    }

    /// From a JSON-RPC message's bytes: its `params._meta` (the bytes are searched first,
    /// so a message without one is not parsed).
    pub fn in_message(body: &[u8]) -> Option<TraceContext> {
        memchr::memmem::find(body, b"traceparent")?;
        let message: Value = serde_json::from_slice(body).ok()?;
        TraceContext::from_meta(message.get("params")?)
    }

    /// The trace id.
    pub fn trace_id(&self) -> &str {
        self.traceparent.get(3..35).unwrap_or_default()
    }

    /// Writes the context into `params._meta`, unless it holds a `traceparent` already.
    pub fn into_meta(&self, params: &mut Map<String, Value>) {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return;
        };
        if meta.contains_key("traceparent") {
            return;
        }
        meta.insert("traceparent".into(), self.traceparent.clone().into());
        for (key, value) in [("tracestate", &self.tracestate), ("baggage", &self.baggage)] {
            if let Some(value) = value {
                meta.insert(key.into(), value.clone().into());
            }
        }
    }

    /// Writes the context into `params._meta` as the next hop's parent: its
    /// `traceparent` replaces one already there; `tracestate` and `baggage` fill in only
    /// what is missing.
    pub fn over_meta(&self, params: &mut Map<String, Value>) {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return;
        };
        meta.insert("traceparent".into(), self.traceparent.clone().into());
        for (key, value) in [("tracestate", &self.tracestate), ("baggage", &self.baggage)] {
            if let Some(value) = value
                && !meta.contains_key(key)
            {
                meta.insert(key.into(), value.clone().into());
            }
        }
    }

    /// The headers to send: `(name, value)`.
    pub fn headers(&self) -> Vec<(&'static str, &str)> {
        let mut headers = vec![("traceparent", self.traceparent.as_str())];
        if let Some(state) = &self.tracestate {
            headers.push(("tracestate", state));
        }
        if let Some(baggage) = &self.baggage {
            headers.push(("baggage", baggage));
        }
        headers
    }
}

/// The trace id of a W3C `traceparent` (`00-TRACEID-SPANID-FLAGS`), if it is one.
pub fn trace_id(traceparent: &str) -> Option<String> {
    let traceparent = traceparent.trim();
    if !traceparent.is_ascii() {
        return None;
    }
    let mut parts = traceparent.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    let valid = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(span, 16)
        && span.bytes().any(|b| b != b'0')
        && hex(flags, 2);
    valid.then(|| trace.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_gives_its_trace_id_and_a_bad_one_nothing() {
        assert_eq!(
            trace_id(PARENT).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(trace_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn meta_wins_over_the_header_and_a_header_fills_an_empty_meta() {
        let header = "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-00f067aa0ba902b7-01";
        let from_header =
            TraceContext::from_headers(|name| (name == "traceparent").then_some(header)).unwrap();
        let mut params = json!({"name": "x", "_meta": {"traceparent": PARENT}});
        from_header.into_meta(params.as_object_mut().unwrap());
        assert_eq!(params["_meta"]["traceparent"], PARENT);
        let mut bare = json!({"name": "x"});
        from_header.into_meta(bare.as_object_mut().unwrap());
        assert_eq!(bare["_meta"]["traceparent"], header);
        assert_eq!(from_header.trace_id(), "a".repeat(32));
    }

    #[test]
    fn surrounding_whitespace_of_any_kind_never_breaks_the_trace_id() {
        for padded in [format!("  {PARENT} "), format!("\u{a0}\u{a0}{PARENT}")] {
            let params = json!({"_meta": {"traceparent": padded}});
            if let Some(found) = TraceContext::from_meta(&params) {
                assert_eq!(found.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
            }
        }
        let long = json!({"_meta": {"traceparent": PARENT, "tracestate": "k=".repeat(400)}});
        assert_eq!(TraceContext::from_meta(&long).unwrap().tracestate, None);
    }

    #[test]
    fn a_message_is_read_only_when_it_names_a_traceparent() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"_meta": {"traceparent": PARENT, "tracestate": "k=v"}}});
        let found = TraceContext::in_message(message.to_string().as_bytes()).unwrap();
        assert_eq!(
            found.headers(),
            vec![("traceparent", PARENT), ("tracestate", "k=v")]
        );
        assert_eq!(
            TraceContext::in_message(b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}"),
            None
        );
        let bad = json!({"params": {"_meta": {"traceparent": "nope"}}});
        assert_eq!(TraceContext::in_message(bad.to_string().as_bytes()), None);
    }
}
