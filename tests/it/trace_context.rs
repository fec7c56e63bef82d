//! W3C trace context (SEP-414) through both modes: serve writes a request's `traceparent`
//! header into `params._meta` for its stdio server (which sees no headers), in both eras,
//! and leaves a `_meta.traceparent` the client sent as it is (it wins); the relay sends the
//! host's `_meta.traceparent` upstream as headers too, and so a remote server behind
//! serve gets the client's context both ways.

use serde_json::{Value, json};

use crate::common::serve::*;
use crate::common::*;

const HEADER: &str = "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-00f067aa0ba902b7-01";
const META: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn serve_hands_the_trace_context_to_its_stdio_server_in_both_eras() {
    let serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    let call = |meta: Option<&str>| {
        let mut params = json!({"name": "trace", "arguments": {}});
        if let Some(meta) = meta {
            params["_meta"] = json!({"traceparent": meta});
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    };
    let legacy = async |meta: Option<&str>, header: Option<&str>| {
        let mut headers = vec![("mcp-session-id", session.as_str())];
        headers.extend(header.map(|h| ("traceparent", h)));
        let answer = serve
            .send("POST", "/mcp", &headers, &call(meta).to_string())
            .await;
        answer.json()
    };
    assert_eq!(
        text(&legacy(None, None).await),
        "none",
        "the channel is alive"
    );
    assert_eq!(text(&legacy(None, Some(HEADER)).await), HEADER);
    assert_eq!(
        text(&legacy(Some(META), Some(HEADER)).await),
        META,
        "_meta wins"
    );
    assert_eq!(text(&legacy(Some(META), None).await), META);

    let modern = async |meta: Option<&str>, header: Option<&str>| {
        let mut params = json!({"name": "trace", "arguments": {}});
        if let Some(meta) = meta {
            params["_meta"] = json!({"traceparent": meta});
        }
        let extra: Vec<(&str, &str)> = header.map(|h| ("traceparent", h)).into_iter().collect();
        serve
            .modern_with(json!(2), "tools/call", params, Some("trace"), &extra)
            .await
            .json()
    };
    assert_eq!(text(&modern(None, None).await), "none");
    assert_eq!(text(&modern(None, Some(HEADER)).await), HEADER);
    assert_eq!(
        text(&modern(Some(META), Some(HEADER)).await),
        META,
        "_meta wins"
    );
}

#[tokio::test]
async fn the_relay_sends_the_hosts_trace_context_upstream_as_headers_too() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start(&upstream.url, &["--protocol-era", "legacy"]).await;
    relay.initialize().await;
    relay
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "x", "arguments": {}, "_meta": {"traceparent": META, "tracestate": "k=v"}}}),
        )
        .await;
    assert_eq!(relay.recv().await["id"], 1);
    relay
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "y"}}))
        .await;
    assert_eq!(relay.recv().await["id"], 2);
    let calls = upstream.posts_of("tools/call");
    let traced = calls.iter().find(|s| s.json()["id"] == 1).unwrap();
    assert_eq!(traced.header("traceparent").as_deref(), Some(META));
    assert_eq!(traced.header("tracestate").as_deref(), Some("k=v"));
    assert_eq!(
        traced.json()["params"]["_meta"]["traceparent"],
        META,
        "and in _meta still"
    );
    let plain = calls.iter().find(|s| s.json()["id"] == 2).unwrap();
    assert_eq!(plain.header("traceparent"), None);
}

#[tokio::test]
async fn serves_log_lines_for_a_request_name_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rules]]\nname = \"no-echo\"\nphase = \"call\"\neffect = \"deny\"\nwhen = \"tool.name == 'echo'\"\n",
    )
    .unwrap();
    let serve = Serve::start(&["--policy", policy.to_str().unwrap()]).await;
    let session = serve.initialize().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}});
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("traceparent", HEADER),
    ];
    let refused = serve
        .send("POST", "/mcp", &headers, &call.to_string())
        .await;
    assert_eq!(
        refused.json()["result"]["isError"],
        true,
        "{}",
        refused.body
    );
    serve.wait_stderr("the policy refused a request").await;
    let line = serve
        .stderr()
        .lines()
        .find(|l| l.contains("the policy refused a request"))
        .unwrap()
        .to_owned();
    assert!(
        line.contains(&format!("trace_id={}", "a".repeat(32))),
        "{line}"
    );
}

#[tokio::test]
async fn serve_hands_the_trace_context_to_a_remote_server_in_meta_and_headers() {
    let upstream = Upstream::start(basic).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    std::fs::write(
        &file,
        format!("[servers.far]\ntype = \"http\"\nurl = {:?}\n", upstream.url),
    )
    .unwrap();
    let serve = Serve::start_config(&file, &[], &[]).await;
    let init = serve
        .send("POST", "/far/mcp", &[], &initialize_body())
        .await;
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.session();
    for (id, header) in [(1, Some(HEADER)), (2, None)] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "x", "arguments": {}}});
        let mut headers = vec![("mcp-session-id", session.as_str())];
        headers.extend(header.map(|h| ("traceparent", h)));
        let answer = serve
            .send("POST", "/far/mcp", &headers, &call.to_string())
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let calls = eventually("two calls upstream", async || {
        let calls = upstream.posts_of("tools/call");
        (calls.len() >= 2)
            .then_some(calls)
            .ok_or("not yet".to_owned())
    })
    .await;
    // The relay serve runs for the remote server gets the context in `_meta` and sends it
    // on in both places.
    let traced: Vec<_> = calls
        .iter()
        .filter(|s| s.header("traceparent").is_some())
        .collect();
    assert_eq!(traced.len(), 1, "only the call that had one carries one");
    assert_eq!(traced[0].header("traceparent").as_deref(), Some(HEADER));
    assert_eq!(traced[0].json()["params"]["_meta"]["traceparent"], HEADER);
}
