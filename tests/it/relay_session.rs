//! Sessions: session id and protocol-version headers, 404 recovery with the host's own
//! initialize, DELETE at shutdown, and the GET stream for server-initiated messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::*;
use axum::http::Method;
use serde_json::json;

#[tokio::test]
async fn sends_the_session_id_and_protocol_version_after_initialize() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let answer = relay.initialize().await;
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
    relay.call(json!(1), "tools/list", json!({})).await;

    let init = &upstream.posts_of("initialize")[0];
    assert_eq!(
        init.header("mcp-session-id"),
        None,
        "never a session id on initialize"
    );
    assert_eq!(
        init.header("accept").as_deref(),
        Some("application/json, text/event-stream")
    );
    assert_eq!(
        init.header("content-type").as_deref(),
        Some("application/json")
    );
    let list = &upstream.posts_of("tools/list")[0];
    assert_eq!(list.header("mcp-session-id").as_deref(), Some("session-1"));
    assert_eq!(
        list.header("mcp-protocol-version").as_deref(),
        Some("2025-06-18")
    );
    let initialized = &upstream.posts_of("notifications/initialized")[0];
    assert_eq!(
        initialized.header("mcp-session-id").as_deref(),
        Some("session-1")
    );
}

#[tokio::test]
async fn a_lost_session_is_re_initialized_with_the_hosts_own_parameters() {
    // The server forgets the first session after the first tools/list.
    let sessions = Arc::new(AtomicUsize::new(0));
    let forgotten = Arc::new(AtomicUsize::new(0));
    let (s, f) = (sessions.clone(), forgotten.clone());
    let upstream = Upstream::start(move |seen| {
        let request = seen.json();
        if request["method"] == "initialize" {
            let n = s.fetch_add(1, Ordering::SeqCst) + 1;
            return Reply::Json {
                status: 200,
                body: result_for(&request, json!({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "f", "version": "1"}})).to_string(),
                headers: vec![("mcp-session-id", format!("session-{n}"))],
            };
        }
        if seen.header("mcp-session-id").as_deref() == Some("session-1") && f.load(Ordering::SeqCst) > 0 {
            return Reply::Json { status: 404, body: json!({"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}).to_string(), headers: vec![] };
        }
        if request["method"] == "tools/list" {
            f.fetch_add(1, Ordering::SeqCst);
        }
        basic(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay.call(json!(1), "tools/list", json!({})).await;
    // Now the session is gone: the relay re-initializes and retries transparently.
    let answer = relay
        .call(
            json!(2),
            "tools/call",
            json!({"name": "t", "arguments": {}}),
        )
        .await;
    assert_eq!(answer["result"]["echo"], "tools/call", "{answer}");

    let inits = upstream.posts_of("initialize");
    assert_eq!(inits.len(), 2);
    assert_eq!(
        inits[1].json()["params"],
        host_initialize_params(),
        "the host's real capabilities and clientInfo"
    );
    assert_ne!(
        inits[1].json()["id"],
        json!(0),
        "the relay's own id, never one the host could be waiting on"
    );
    assert_eq!(inits[1].header("mcp-session-id"), None);
    let initialized = upstream.posts_of("notifications/initialized");
    assert_eq!(
        initialized
            .last()
            .unwrap()
            .header("mcp-session-id")
            .as_deref(),
        Some("session-2")
    );
    let calls = upstream.posts_of("tools/call");
    assert_eq!(
        calls.last().unwrap().header("mcp-session-id").as_deref(),
        Some("session-2")
    );
    // The re-initialize answer never reached the host: the next line is our ping's answer.
    assert!(relay.ping_through("p").await.is_empty());
}

#[tokio::test]
async fn stdin_eof_deletes_the_session_and_exits_zero() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay.ping_through("alive").await;
    relay.close_stdin();
    assert_eq!(relay.wait_exit().await.code(), Some(0));
    let deletes: Vec<_> = upstream
        .seen()
        .into_iter()
        .filter(|s| s.method == Method::DELETE)
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(
        deletes[0].header("mcp-session-id").as_deref(),
        Some("session-1")
    );
}

#[tokio::test]
async fn sigterm_lets_a_call_in_flight_finish_then_deletes_the_session() {
    let go = Arc::new(tokio::sync::Notify::new());
    let release = go.clone();
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            Reply::Delayed(
                release.clone(),
                Box::new(json_reply(result_for(&request, json!({"done": true})))),
            )
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"x"}}))
        .await;
    upstream.wait_for_method("tools/call").await;
    relay.signal("TERM");
    // Let the relay see the signal, then let the call finish within the grace period.
    wait_for_stderr(&relay, "SIGTERM").await;
    go.notify_one();
    let answer = relay.recv().await;
    assert_eq!(answer["result"]["done"], true, "{answer}");
    assert_eq!(relay.wait_exit().await.code(), Some(0));
    assert!(upstream.seen().iter().any(|s| s.method == Method::DELETE));
}

#[tokio::test]
async fn shutdown_answers_what_did_not_finish_within_the_grace() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Sse {
            headers: vec![],
            steps: vec![Step::Hang],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--shutdown-grace", "0.2"]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}))
        .await;
    upstream.wait_for_method("tools/call").await;
    relay.signal("INT");
    let answer = relay.recv().await;
    assert_eq!(answer["id"], 7);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shut down"),
        "{answer}"
    );
    assert_eq!(relay.wait_exit().await.code(), Some(0));
}

#[tokio::test]
async fn server_requests_on_the_get_stream_reach_the_host_and_answers_go_back() {
    let upstream = Upstream::start(|seen| {
        if seen.method == Method::GET {
            return Reply::Sse {
                headers: vec![],
                steps: vec![
                    priming("g0", None),
                    event(
                        "g1",
                        json!({"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}),
                    ),
                    event(
                        "g2",
                        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
                    ),
                    Step::Hang,
                ],
            };
        }
        basic(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let request = relay.recv().await;
    assert_eq!(
        request,
        json!({"jsonrpc":"2.0","id":"srv-1","method":"roots/list"})
    );
    let get = upstream
        .seen()
        .into_iter()
        .find(|s| s.method == Method::GET)
        .unwrap();
    assert_eq!(get.header("mcp-session-id").as_deref(), Some("session-1"));
    assert_eq!(get.header("accept").as_deref(), Some("text/event-stream"));
    let notification = relay.recv().await;
    assert_eq!(notification["method"], "notifications/tools/list_changed");

    relay
        .send(json!({"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}))
        .await;
    let answers = upstream
        .wait_until("the host's answer", |s| {
            s.iter()
                .any(|s| s.json()["id"] == "srv-1" && s.json().get("result").is_some())
        })
        .await;
    let answer = answers.iter().find(|s| s.json()["id"] == "srv-1").unwrap();
    assert_eq!(
        answer.header("mcp-session-id").as_deref(),
        Some("session-1")
    );
    // 202 for the answer: nothing written for it (the Python tool writes a bogus error).
    assert!(relay.ping_through("after").await.is_empty());
}

pub async fn wait_for_stderr(relay: &Relay, needle: &str) {
    crate::common::wait_logged(|| relay.stderr(), needle).await;
}

#[tokio::test]
async fn an_idle_server_stream_is_reopened_after_sse_read_timeout() {
    let upstream = Upstream::start(|seen| {
        if seen.method == Method::GET {
            return Reply::Sse {
                headers: vec![],
                steps: vec![priming("idle-1", None), Step::Hang],
            };
        }
        basic(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--sse-read-timeout", "0.3"]).await;
    relay.initialize().await;
    let seen = upstream
        .wait_until("the GET stream reopened", |s| {
            s.iter().filter(|s| s.method == Method::GET).count() >= 2
        })
        .await;
    let reopened = seen
        .iter()
        .filter(|s| s.method == Method::GET)
        .nth(1)
        .unwrap();
    assert_eq!(reopened.header("last-event-id").as_deref(), Some("idle-1"));
}
