//! One MCP operation's span and duration: opened from the facts of its audit record (method,
//! target, id, session) under the trace context it came with, ended with its outcome. The
//! names are the MCP semantic conventions': span `{mcp.method.name} {target}`,
//! `mcp.method.name`, `jsonrpc.request.id`, `mcp.session.id`, `mcp.protocol.version`,
//! `gen_ai.tool.name`, `gen_ai.prompt.name`, `mcp.resource.uri`, `error.type`. Arguments and
//! results are never recorded.

use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;

use super::{Telemetry, installed};
use crate::audit::{Observer, Outcome, Record};
use crate::trace_context::TraceContext;

/// Which side of MCP this process is on for an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `serve`: requests are received (spans of kind SERVER).
    Server,
    /// The relay: requests are sent on to a server (spans of kind CLIENT).
    Client,
}

impl Side {
    pub(super) fn duration_metric(self) -> &'static str {
        match self {
            Side::Server => "mcp.server.operation.duration",
            Side::Client => "mcp.client.operation.duration",
        }
    }

    pub(super) fn session_metric(self) -> &'static str {
        match self {
            Side::Server => "mcp.server.session.duration",
            Side::Client => "mcp.client.session.duration",
        }
    }
}

/// An operation's span in progress and what its metric needs.
pub struct Operation {
    context: Context,
    /// The attributes the duration metric is recorded with (low cardinality only).
    metric: Vec<KeyValue>,
}

impl Operation {
    /// Opens the operation of `record` (a request as it arrived), a child of `parent` when
    /// the request carried one; `protocol` is the MCP version it speaks, if known. `None`
    /// when telemetry is off.
    pub fn start(
        record: &Record,
        parent: Option<&TraceContext>,
        protocol: Option<&str>,
    ) -> Option<Operation> {
        let telemetry = installed()?;
        let method = record.method.as_str();
        let name = record.name.as_deref();
        let mut metric = vec![KeyValue::new("mcp.method.name", method.to_owned())];
        if let Some(protocol) = protocol.and_then(known_version) {
            metric.push(KeyValue::new("mcp.protocol.version", protocol));
        }
        let target = match (method, name) {
            ("tools/call", Some(tool)) => {
                metric.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
                Some(tool)
            }
            ("prompts/get", Some(prompt)) => {
                metric.push(KeyValue::new("gen_ai.prompt.name", prompt.to_owned()));
                Some(prompt)
            }
            _ => None,
        };
        metric.push(KeyValue::new("network.transport", "tcp"));
        let parent_context = parent.map_or_else(Context::new, extract);
        let context = match &telemetry.tracer {
            Some(tracer) => {
                let mut attributes = metric.clone();
                attributes.push(KeyValue::new("jsonrpc.protocol.version", "2.0"));
                attributes.push(KeyValue::new("jsonrpc.request.id", request_id(&record.id)));
                attributes.push(KeyValue::new("network.protocol.name", "http"));
                if let Some(session) = &record.session {
                    attributes.push(KeyValue::new("mcp.session.id", session.clone()));
                }
                if method == "tools/call" {
                    attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                }
                if let (Some(uri), true) = (name, method.starts_with("resources/")) {
                    attributes.push(KeyValue::new("mcp.resource.uri", uri.to_owned()));
                }
                let span_name = match target {
                    Some(target) => format!("{method} {target}"),
                    None => method.to_owned(),
                };
                let span = tracer
                    .span_builder(span_name)
                    .with_kind(match telemetry.side {
                        Side::Server => SpanKind::Server,
                        Side::Client => SpanKind::Client,
                    })
                    .with_attributes(attributes)
                    .start_with_context(tracer, &parent_context);
                parent_context.with_span(span)
            }
            None => parent_context,
        };
        Some(Operation { context, metric })
    }

    /// The trace the operation is in (its span's, or its parent's without traces).
    pub fn trace_id(&self) -> Option<String> {
        trace_id_of(&self.context)
    }

    /// The context to run the operation's work in, so that what it sends on carries its
    /// span (`telemetry::outgoing`).
    pub fn context(&self) -> Context {
        self.context.clone()
    }
}

impl Observer for Operation {
    fn ended(self: Box<Self>, record: &Record, duration: Duration) {
        let Some(telemetry) = installed() else { return };
        let Operation {
            context,
            mut metric,
        } = *self;
        let error = error_type(record);
        if let Some(error) = &error {
            metric.push(KeyValue::new("error.type", error.clone()));
        }
        bound_cardinality(&mut metric, record);
        record_duration(telemetry, duration, &metric);
        let span = context.span();
        if let Some(error) = error {
            if let Some(code) = record
                .error_code
                .filter(|_| record.outcome == Outcome::ProtocolError)
            {
                span.set_attribute(KeyValue::new("rpc.response.status_code", code.to_string()));
            }
            if let Some(rule) = &record.rule {
                span.set_attribute(KeyValue::new("mcp_stdio.policy.rule", rule.clone()));
            }
            span.set_attribute(KeyValue::new("error.type", error.clone()));
            span.set_status(Status::error(error));
        }
        if record.session.is_some() {
            // A session made by this very request (initialize) is known only at its end.
            span.set_attribute(KeyValue::new(
                "mcp.session.id",
                record.session.clone().unwrap_or_default(),
            ));
        }
        span.end();
    }
}

/// A protocol version this build knows, as the metric names it: any other text a client
/// sends in its header would be a series of its own.
pub(super) fn known_version(version: &str) -> Option<&'static str> {
    crate::era::LEGACY_VERSIONS
        .iter()
        .chain(crate::era::MODERN_VERSIONS)
        .find(|known| **known == version)
        .copied()
}

/// The MCP methods a metric names as they are; any other is `_OTHER` (a client may send
/// any name it likes, and each would be a series of its own).
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
];

/// A metric's names are the server's, not whatever a client asked for: a method outside
/// MCP's is `_OTHER`, and a tool or prompt is named only when the server answered the
/// call (a result, a tool's error, an input round): a refusal, a protocol error, a
/// timeout or a cancellation names none, since its name may be anything the client sent.
fn bound_cardinality(metric: &mut Vec<KeyValue>, record: &Record) {
    let answered = matches!(
        record.outcome,
        Outcome::Ok | Outcome::ToolError | Outcome::InputRequired
    );
    if !answered {
        metric.retain(|kv| !matches!(kv.key.as_str(), "gen_ai.tool.name" | "gen_ai.prompt.name"));
    }
    for kv in metric.iter_mut() {
        if kv.key.as_str() == "mcp.method.name"
            && !KNOWN_METHODS.contains(&kv.value.as_str().as_ref())
        {
            *kv = KeyValue::new("mcp.method.name", "_OTHER");
        }
    }
}

fn record_duration(telemetry: &Telemetry, duration: Duration, attributes: &[KeyValue]) {
    if let Some(histogram) = &telemetry.duration {
        histogram.record(duration.as_secs_f64(), attributes);
    }
}

/// `error.type` of an ended operation: the JSON-RPC error code, `tool_error` for a tool's
/// `isError` result (as the conventions say), or what stopped it.
fn error_type(record: &Record) -> Option<String> {
    match record.outcome {
        Outcome::Ok | Outcome::InputRequired => None,
        Outcome::ToolError => Some("tool_error".into()),
        Outcome::Refused => Some("refused".into()),
        Outcome::Timeout => Some("timeout".into()),
        Outcome::Cancelled => Some("cancelled".into()),
        Outcome::ProtocolError => Some(
            record
                .error_code
                .map_or_else(|| "protocol_error".into(), |c| c.to_string()),
        ),
    }
}

/// The trace id of a context's span, if it has a valid one.
pub fn trace_id_of(context: &Context) -> Option<String> {
    let span = context.span();
    let span_context = span.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// The id as text: a string's value, a number's digits.
fn request_id(id: &serde_json::Value) -> String {
    match id {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The OpenTelemetry context of a W3C trace context.
fn extract(trace: &TraceContext) -> Context {
    struct Carrier<'a>(&'a TraceContext);
    impl Extractor for Carrier<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            match key {
                "traceparent" => Some(&self.0.traceparent),
                "tracestate" => self.0.tracestate.as_deref(),
                _ => None,
            }
        }
        fn keys(&self) -> Vec<&str> {
            vec!["traceparent", "tracestate"]
        }
    }
    TraceContextPropagator::new().extract(&Carrier(trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_types_follow_the_conventions() {
        let mut record =
            Record::of_request("tools/call", "1", serde_json::json!({"name": "x"}), false);
        assert_eq!(error_type(&record), None);
        record.outcome = Outcome::ToolError;
        assert_eq!(error_type(&record).as_deref(), Some("tool_error"));
        record.outcome = Outcome::ProtocolError;
        record.error_code = Some(-32602);
        assert_eq!(error_type(&record).as_deref(), Some("-32602"));
    }

    #[test]
    fn a_parent_is_read_from_the_w3c_context() {
        let parent = TraceContext::from_parts(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            None,
            None,
        )
        .unwrap();
        let context = extract(&parent);
        let span = context.span();
        let read = span.span_context();
        assert_eq!(
            read.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(read.is_remote() && read.is_sampled());
        assert_eq!(request_id(&serde_json::json!("a")), "a");
        assert_eq!(request_id(&serde_json::json!(7)), "7");
    }
}
