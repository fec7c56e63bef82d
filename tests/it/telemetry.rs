//! OpenTelemetry through both modes, against a fake OTLP/HTTP collector: serve exports a
//! SERVER span per request named and attributed as the MCP semantic conventions say, a
//! child of the client's trace context, and hands its own span to the stdio server as the
//! parent; the relay does the same as a CLIENT toward its upstream (headers and `_meta`);
//! both export the operation-duration histogram; argument values are never exported; a
//! collector that cannot be spoken to is refused at start, saying what works.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::collector::Collector;
use crate::common::serve::*;
use crate::common::*;

const META: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const HEADER: &str = "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-00f067aa0ba902b7-01";
/// Fast exports, so a test waits milliseconds, not the SDK's default seconds.
const FAST: [(&str, &str); 3] = [
    ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
    ("OTEL_SERVICE_NAME", "gateway-under-test"),
];

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

fn call(id: &str, tool: &str, meta: Option<&str>) -> String {
    let mut params = json!({"name": tool, "arguments": {"text": "hunter2-argument"}});
    if let Some(meta) = meta {
        params["_meta"] = json!({"traceparent": meta});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// A legacy-era relay in front of the basic upstream, exporting to a collector of its own,
/// with `extra` flags.
async fn traced_relay(extra: &[&str]) -> (Collector, Upstream, Relay) {
    let collector = Collector::start().await;
    let upstream = Upstream::start(basic).await;
    let mut flags = vec![
        "--protocol-era",
        "legacy",
        "--otel-endpoint",
        &collector.url,
    ];
    flags.extend_from_slice(extra);
    let relay = Relay::start_with_env(&upstream.url, &flags, &FAST).await;
    (collector, upstream, relay)
}

#[tokio::test]
async fn serve_exports_a_span_per_request_and_its_stdio_server_is_the_spans_child() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let serve = Serve::start_with(
        &[
            "--otel-endpoint",
            &collector.url,
            "--audit-log",
            audit.to_str().unwrap(),
        ],
        &[fixture().as_str()],
        &FAST,
    )
    .await;
    let session = serve.initialize().await;
    let headers = [("mcp-session-id", session.as_str())];

    // In the client's trace (its `_meta`): the server sees the gateway's span as parent.
    let answer = serve
        .send("POST", "/mcp", &headers, &call("t1", "trace", Some(META)))
        .await
        .json();
    let span = collector.span(|s| s.name == "tools/call trace").await;
    assert_eq!(span.kind, 2, "SERVER");
    assert_eq!(span.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(span.parent_span_id, "00f067aa0ba902b7");
    assert_eq!(
        text(&answer),
        format!("00-{}-{}-01", span.trace_id, span.span_id),
        "the stdio server's parent is the gateway's span: {answer}"
    );
    let attribute = |name: &str| span.attributes.get(name).cloned().unwrap_or_default();
    assert_eq!(attribute("mcp.method.name"), "tools/call");
    assert_eq!(attribute("gen_ai.tool.name"), "trace");
    assert_eq!(attribute("gen_ai.operation.name"), "execute_tool");
    assert_eq!(attribute("jsonrpc.request.id"), "t1");
    assert_eq!(
        attribute("mcp.session.id"),
        session[..8],
        "short, as the logs name it"
    );
    assert_eq!(span.service, "gateway-under-test");
    assert_eq!(span.status, 0);

    // The HTTP header's context when `_meta` has none; a tool's error is the span's.
    let headers_traced = [
        ("mcp-session-id", session.as_str()),
        ("traceparent", HEADER),
    ];
    serve
        .send("POST", "/mcp", &headers_traced, &call("t2", "fail", None))
        .await;
    let failed = collector.span(|s| s.name == "tools/call fail").await;
    assert_eq!(failed.trace_id, "a".repeat(32));
    assert_eq!(failed.attributes["error.type"], "tool_error");
    assert_eq!(failed.status, 2, "error");
    collector
        .metric("mcp.server.operation.duration", |a| {
            a.get("mcp.method.name").map(String::as_str) == Some("tools/call")
                && a.get("error.type").map(String::as_str) == Some("tool_error")
                && a.get("gen_ai.tool.name").map(String::as_str) == Some("fail")
        })
        .await;

    // The audit line names the trace; no argument value is ever exported.
    let lines = eventually("two tools/call audit lines", async || {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let found: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["method"] == "tools/call")
            .collect();
        (found.len() >= 2).then_some(found).ok_or(text)
    })
    .await;
    assert_eq!(lines[0]["trace_id"], span.trace_id);
    let bodies = collector.bodies();
    assert!(!bodies.is_empty());
    for body in bodies {
        assert!(
            memchr::memmem::find(&body, b"hunter2-argument").is_none(),
            "an argument value was exported"
        );
    }
}

#[tokio::test]
async fn the_relay_exports_a_client_span_and_sends_it_upstream_as_the_parent() {
    let (collector, upstream, mut relay) = traced_relay(&[]).await;
    relay.initialize().await;
    relay
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "x", "arguments": {}, "_meta": {"traceparent": META, "tracestate": "k=v"}}}),
        )
        .await;
    assert_eq!(
        relay.recv().await["id"],
        1,
        "stdout is still only the protocol"
    );
    let span = collector.span(|s| s.name == "tools/call x").await;
    assert_eq!(span.kind, 3, "CLIENT");
    assert_eq!(span.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(span.parent_span_id, "00f067aa0ba902b7");
    let ours = format!("00-{}-{}-01", span.trace_id, span.span_id);
    let sent = upstream
        .posts_of("tools/call")
        .into_iter()
        .find(|s| s.json()["id"] == 1)
        .unwrap();
    assert_eq!(sent.header("traceparent").as_deref(), Some(ours.as_str()));
    assert_eq!(sent.header("tracestate").as_deref(), Some("k=v"));
    assert_eq!(sent.json()["params"]["_meta"]["traceparent"], ours);
    assert_eq!(sent.json()["params"]["_meta"]["tracestate"], "k=v");
    collector
        .metric("mcp.client.operation.duration", |a| {
            a.get("mcp.method.name").map(String::as_str) == Some("tools/call")
        })
        .await;
}

#[tokio::test]
async fn the_relay_logs_the_trace_its_span_starts_for_a_request_with_none() {
    let (collector, _upstream, mut relay) = traced_relay(&["--log-level", "debug"]).await;
    // The host sends no traceparent: the relay's span starts a trace, and the request's
    // log line names it.
    relay.initialize().await;
    let span = collector.span(|s| s.name == "initialize").await;
    assert_eq!(span.parent_span_id, "", "a trace of its own");
    relay
        .wait_stderr(&format!(
            "request{{trace_id={}}}: upstream session established",
            span.trace_id
        ))
        .await;
}

#[tokio::test]
async fn sessions_are_measured_and_names_no_server_knows_make_no_series_of_their_own() {
    let collector = Collector::start().await;
    let serve = Serve::start_with(
        &["--otel-endpoint", &collector.url],
        &[fixture().as_str()],
        &FAST,
    )
    .await;
    let session = serve.initialize().await;
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let bogus = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "no-such-tool-7f3a", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "no-such/method-7f3a", "params": {}}),
    ];
    for message in &bogus {
        serve
            .send("POST", "/mcp", &headers, &message.to_string())
            .await;
    }
    let deleted = serve.send("DELETE", "/mcp", &headers, "").await;
    assert!(deleted.status < 300, "{}", deleted.status);
    collector
        .metric("mcp.server.session.duration", |a| {
            a.get("mcp.protocol.version").map(String::as_str) == Some("2025-06-18")
                && !a.contains_key("error.type")
        })
        .await;
    // Both refusals were measured (the channel is alive), under names the server knows.
    collector
        .metric("mcp.server.operation.duration", |a| {
            a.get("mcp.method.name").map(String::as_str) == Some("_OTHER")
                && a.get("error.type").map(String::as_str) == Some("-32601")
        })
        .await;
    collector
        .metric("mcp.server.operation.duration", |a| {
            a.get("mcp.method.name").map(String::as_str) == Some("tools/call")
                && a.get("error.type").map(String::as_str) == Some("-32602")
        })
        .await;
    for (name, attributes) in collector.metric_points() {
        assert!(
            !attributes.values().any(|v| v.contains("7f3a")),
            "{name} has a series named by the client: {attributes:?}"
        );
    }

    // A session whose server exits under it ends with an error type.
    let crashed = serve.initialize().await;
    serve
        .send(
            "POST",
            "/mcp",
            &[("mcp-session-id", crashed.as_str())],
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "crash", "arguments": {}}}).to_string(),
        )
        .await;
    collector
        .metric("mcp.server.session.duration", |a| {
            a.get("error.type").map(String::as_str) == Some("server_exited")
        })
        .await;
}

#[tokio::test]
async fn the_relays_session_is_measured_when_it_ends() {
    let (collector, _upstream, mut relay) = traced_relay(&[]).await;
    relay.initialize().await;
    relay.close_stdin();
    collector
        .metric("mcp.client.session.duration", |a| {
            a.contains_key("mcp.protocol.version") && !a.contains_key("error.type")
        })
        .await;
}

/// Flags, environment, and what the refusal must say.
type Refused<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[tokio::test]
async fn a_collector_that_cannot_be_spoken_to_is_refused_at_start_saying_what_works() {
    let cases: [Refused; 3] = [
        (
            &["--otel-endpoint", "http://user:hunter2@127.0.0.1:4318"],
            &[],
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            &["--otel-endpoint", "http://127.0.0.1:4317"],
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "http/protobuf",
        ),
        (
            &[],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
            "http://127.0.0.1:4318",
        ),
    ];
    for (flags, env, says) in cases {
        let mut command = std::process::Command::new(binary());
        command.arg("serve").args(flags).args(["--", "true"]);
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?} {env:?}: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
}

#[tokio::test]
async fn the_standard_sampler_variables_decide_which_requests_are_traced() {
    // parentbased_always_off: a root request is not sampled; one whose caller sampled it is.
    let collector = Collector::start().await;
    let mut env = FAST.to_vec();
    env.push(("OTEL_TRACES_SAMPLER", "parentbased_always_off"));
    let serve = Serve::start_with(
        &["--otel-endpoint", &collector.url],
        &[fixture().as_str()],
        &env,
    )
    .await;
    let session = serve.initialize().await;
    let headers = [("mcp-session-id", session.as_str())];
    let unsampled = serve
        .send("POST", "/mcp", &headers, &call("u", "trace", None))
        .await
        .json();
    let handed = text(&unsampled).to_owned();
    assert!(
        handed.ends_with("-00"),
        "not sampled, and says so: {handed}"
    );
    serve
        .send("POST", "/mcp", &headers, &call("s", "echo", Some(META)))
        .await;
    // Spans leave in the order they end: the sampled one arriving proves the other never will.
    collector.span(|s| s.name == "tools/call echo").await;
    assert!(
        !collector
            .spans()
            .iter()
            .any(|s| s.name == "tools/call trace"),
        "{:#?}",
        collector.spans()
    );
}

#[tokio::test]
async fn a_slow_collector_never_slows_requests_and_spans_past_the_queue_are_dropped() {
    // Each export takes 2 s; --otel-queue 2 holds two spans while one batch is on its way.
    let collector = Collector::answering_after(Duration::from_secs(2)).await;
    let serve = Serve::start_with(
        &["--otel-endpoint", &collector.url, "--otel-queue", "2"],
        &[fixture().as_str()],
        &FAST,
    )
    .await;
    let session = serve.initialize().await;
    let headers = [("mcp-session-id", session.as_str())];
    for n in 0..30 {
        let answer = serve
            .send(
                "POST",
                "/mcp",
                &headers,
                &call(&format!("c{n}"), "echo", None),
            )
            .await
            .json();
        assert_eq!(
            text(&answer),
            "hunter2-argument",
            "call {n} answered: {answer}"
        );
    }
    // Two exports arrive (the exporter works): the one on its way when the calls began and
    // the one after it, which carries what the queue held, not the calls it had no room for.
    collector.trace_exports(2).await;
    let exported = collector
        .spans()
        .iter()
        .filter(|s| s.name == "tools/call echo")
        .count();
    assert!(
        exported <= 4,
        "{exported} of 30 spans exported past a queue of 2"
    );
}

#[tokio::test]
async fn a_request_with_no_trace_context_logs_the_trace_its_span_starts() {
    let collector = Collector::start().await;
    let serve = Serve::start_with(
        &["--otel-endpoint", &collector.url, "--log-level", "debug"],
        &[fixture().as_str()],
        &FAST,
    )
    .await;
    // No traceparent anywhere: the gateway's span starts a trace, and the request's log
    // line ("session started") names it.
    serve.initialize().await;
    let span = collector.span(|s| s.name == "initialize").await;
    assert_eq!(span.parent_span_id, "", "a trace of its own");
    serve
        .wait_stderr(&format!(
            "request{{trace_id={}}}: session started",
            span.trace_id
        ))
        .await;
}
