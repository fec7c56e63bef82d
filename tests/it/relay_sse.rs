//! The relay over the 2024-11-05 HTTP+SSE transport, against a fake server
//! (`tests/common/sse_server.rs`): endpoints, interleaved answers, a dropped stream with
//! requests in flight, reconnection with the hidden re-initialize, idle detection, a long
//! stream of small events, and `--transport auto` falling back (or not).

use serde_json::{Value, json};

use crate::common::sse_server::SseServer;
use crate::common::{Relay, host_initialize_params};

fn echo(text: &str) -> Value {
    json!({"name": "echo", "arguments": {"text": text}})
}

fn text(answer: &Value) -> &Value {
    &answer["result"]["content"][0]["text"]
}

/// Sends `tools/call slow` (300 ms) with id 1, without waiting for its answer.
async fn send_slow_call(relay: &mut Relay) {
    relay
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"ms": 300}}}))
        .await;
}

async fn initialized(server: &SseServer, args: &[&str]) -> Relay {
    let mut relay = Relay::start(&server.url, args).await;
    let answer = relay.initialize().await;
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "fake-sse",
        "{answer}"
    );
    server
        .wait_posts("notifications/initialized", |posts| {
            posts
                .iter()
                .any(|p| p["method"] == "notifications/initialized")
        })
        .await;
    relay
}

#[tokio::test]
async fn relative_and_absolute_endpoints_are_resolved_against_the_sse_url() {
    for endpoint in [
        "/messages?sessionId=a1",
        "messages?sessionId=a1",
        "{base}/messages?sessionId=a1",
    ] {
        let server = SseServer::start(endpoint).await;
        let mut relay = initialized(&server, &["--transport", "sse"]).await;
        let answer = relay.call(json!(1), "tools/call", echo("hi")).await;
        assert_eq!(text(&answer), "hi", "{endpoint}: {answer}");
        assert_eq!(server.gets(), 1);
    }
}

#[tokio::test]
async fn an_id_null_error_in_the_posts_body_answers_once_and_logs_no_stray_answer() {
    let server = SseServer::start("{base}/messages").await;
    let mut relay = initialized(&server, &["--transport", "sse"]).await;
    let answer = relay
        .call(
            json!(7),
            "tools/call",
            json!({"name": "null_error", "arguments": {}}),
        )
        .await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(
        answer["error"]["message"], "Invalid params: refused",
        "{answer}"
    );
    // The link still works, and the log is written past the refusal ("shutting down"
    // follows it) without a second, stray delivery of the same answer.
    let answer = relay.call(json!(8), "tools/call", echo("after")).await;
    assert_eq!(text(&answer), "after");
    relay.signal("TERM");
    relay.wait_stderr("shutting down").await;
    assert!(
        !relay.stderr().contains("matches no pending request"),
        "{}",
        relay.stderr()
    );
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_and_nothing_is_posted() {
    // Same server, other name: another origin, so the credentials must not go there.
    let server = SseServer::start("http://localhost:1/messages?sessionId=a1").await;
    let mut relay = Relay::start(
        &server.url,
        &[
            "--transport",
            "sse",
            "-H",
            "Authorization: Bearer secret-token",
        ],
    )
    .await;
    let answer = relay
        .call(json!(0), "initialize", host_initialize_params())
        .await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another origin"), "{answer}");
    assert!(server.posts().is_empty());
    // The log is written (this line follows the host's first message), and holds no secret.
    relay.wait_stderr("host protocol era").await;
    assert!(!relay.stderr().contains("secret-token"));
}

#[tokio::test]
async fn answers_are_matched_by_id_whatever_their_order() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(&server, &["--transport", "sse"]).await;
    send_slow_call(&mut relay).await;
    relay
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo("fast")}))
        .await;
    let first = relay.recv().await;
    let second = relay.recv().await;
    assert_eq!(
        (first["id"].clone(), text(&first)),
        (json!(2), &json!("fast"))
    );
    assert_eq!(
        (second["id"].clone(), text(&second)),
        (json!(1), &json!("slept"))
    );
}

#[tokio::test]
async fn a_dropped_stream_fails_what_waits_on_it_then_reconnects_and_reinitializes_unseen() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(&server, &["--transport", "sse"]).await;
    for id in [1, 2] {
        relay
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "hold", "arguments": {}}}))
            .await;
    }
    server
        .wait_posts("both held calls", |posts| {
            posts
                .iter()
                .filter(|p| p["params"]["name"] == "hold")
                .count()
                == 2
        })
        .await;
    relay
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2, "reason": "the user gave up"}}),
        )
        .await;
    server
        .wait_posts("the cancel", |posts| {
            posts
                .iter()
                .any(|p| p["method"] == "notifications/cancelled")
        })
        .await;
    server.drop_stream();
    let failed = relay.recv().await;
    assert_eq!(failed["id"], 1, "{failed}");
    assert_eq!(failed["error"]["code"], -32000);
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("stream dropped before the answer arrived"),
        "{message}"
    );

    // The relay reconnects, replays initialize under its own id, and the host goes on;
    // nothing else reached the host (no answer for the cancelled id, no second
    // initialize answer).
    let before = relay.ping_through("after-reconnect").await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(server.gets(), 2);
    let posts = server.posts();
    let initializes: Vec<&Value> = posts
        .iter()
        .filter(|p| p["method"] == "initialize")
        .collect();
    assert_eq!(initializes.len(), 2, "{posts:#?}");
    assert_eq!(initializes[1]["params"], host_initialize_params());
    assert!(
        initializes[1]["id"]
            .as_str()
            .unwrap()
            .starts_with("mcp-stdio-reinit-")
    );
    let initialized = posts
        .iter()
        .filter(|p| p["method"] == "notifications/initialized")
        .count();
    assert_eq!(initialized, 2);
    let answer = relay.call(json!(3), "tools/call", echo("again")).await;
    assert_eq!(text(&answer), "again");
}

#[tokio::test]
async fn reconnection_backs_off_and_gives_up_after_max_reconnects() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(&server, &["--transport", "sse", "--max-reconnects", "2"]).await;
    // Two refusals, then the third attempt works.
    server.refuse_next_gets(2);
    server.drop_stream();
    // Once the relay is reconnecting, a request waits for the new endpoint.
    server.wait_gets(2).await;
    let answer = relay.call(json!(1), "tools/call", echo("back")).await;
    assert_eq!(text(&answer), "back", "{answer}");
    assert_eq!(server.gets(), 4);

    // Now it never comes back: after two more failed attempts, requests get an error.
    server.refuse_next_gets(1000);
    server.drop_stream();
    server.wait_gets(5).await;
    let answer = relay.call(json!(2), "tools/call", echo("lost")).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("could not be re-established after 3 attempts"),
        "{answer}"
    );
    assert_eq!(server.gets(), 7);
}

#[tokio::test]
async fn a_silent_stream_is_reopened_after_sse_read_timeout() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(&server, &["--transport", "sse", "--sse-read-timeout", "1"]).await;
    server.wait_gets(2).await;
    relay.wait_stderr("reconnecting").await;
    let answer = relay.call(json!(1), "tools/call", echo("awake")).await;
    assert_eq!(text(&answer), "awake");
}

#[tokio::test]
async fn thirty_mebibytes_of_small_events_pass_on_one_stream() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(
        &server,
        &["--transport", "sse", "--max-message-size", "65536"],
    )
    .await;
    let count = 30 * 1024;
    relay
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "flood", "arguments": {"count": count, "size": 1000}}}))
        .await;
    let mut notes = 0;
    loop {
        let message = relay.recv().await;
        if message["id"] == 1 {
            assert_eq!(text(&message), "flooded");
            break;
        }
        assert_eq!(message["method"], "notifications/message");
        notes += 1;
    }
    assert_eq!(notes, count);
    assert_eq!(server.gets(), 1, "no reconnection");
}

#[tokio::test]
async fn auto_falls_back_to_sse_when_the_post_gets_405() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(&server, &[]).await;
    let answer = relay.call(json!(1), "tools/call", echo("via sse")).await;
    assert_eq!(text(&answer), "via sse");
    relay.wait_stderr("transport chosen").await;
    assert!(relay.stderr().contains("HTTP+SSE"), "{}", relay.stderr());
}

#[tokio::test]
async fn auto_does_not_fall_back_on_401_or_500() {
    for status in [401, 500] {
        let server = SseServer::start("/messages?sessionId=a1").await;
        server.set_post_to_sse(status);
        let mut relay = Relay::start(&server.url, &["--protocol-era", "legacy"]).await;
        let answer = relay
            .call(json!(0), "initialize", host_initialize_params())
            .await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("HTTP {status}")), "{answer}");
        assert_eq!(server.gets(), 0, "HTTP {status} is no evidence of HTTP+SSE");
    }
}

#[tokio::test]
async fn at_shutdown_an_answer_still_on_its_way_gets_the_grace_period() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = initialized(&server, &["--transport", "sse"]).await;
    send_slow_call(&mut relay).await;
    server
        .wait_posts("the slow call", |posts| {
            posts.iter().any(|p| p["params"]["name"] == "slow")
        })
        .await;
    relay.close_stdin();
    let answer = relay.recv().await;
    assert_eq!(text(&answer), "slept", "{answer}");
    assert!(relay.wait_exit().await.success());
}

/// A host in auto mode (the Python SDK's and fastmcp's `Client`) probes with
/// `server/discover` and falls back to `initialize` when it is refused. Against an HTTP+SSE
/// server the probe is refused as a legacy server refuses it, and the `initialize` that
/// follows is a legacy host's: the session works (found by fastmcp 4.1.6, which failed).
#[tokio::test]
async fn a_host_probing_with_server_discover_falls_back_to_initialize_over_sse() {
    let server = SseServer::start("/messages?sessionId=a1").await;
    let mut relay = Relay::start(&server.url, &[]).await;
    let probe = relay
        .call(
            json!("probe"),
            "server/discover",
            crate::common::modern::enveloped(json!({})),
        )
        .await;
    assert_eq!(probe["error"]["code"], -32601, "{probe}");
    assert!(
        probe["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("HTTP+SSE") && m.contains("send initialize")),
        "{probe}"
    );
    let answer = relay.initialize().await;
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "fake-sse",
        "{answer}"
    );
    let echoed = relay
        .call(json!(1), "tools/call", echo("after the probe"))
        .await;
    assert_eq!(text(&echoed), "after the probe", "{echoed}");
    // A 2026-07-28 host that does not fall back is refused saying why and what would work.
    let mut modern_only = Relay::start(&server.url, &[]).await;
    let refused = modern_only
        .call(
            json!(2),
            "tools/list",
            crate::common::modern::enveloped(json!({})),
        )
        .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HTTP+SSE") && message.contains("needs a Streamable HTTP server"),
        "{refused}"
    );
}
