//! Responses: JSON and SSE, events passed through as they arrive, resumption with
//! Last-Event-ID honouring `retry:`, and a stream that dies before answering.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use axum::http::Method;
use serde_json::json;
use tokio::sync::Notify;

#[tokio::test]
async fn sse_events_reach_the_host_as_they_arrive() {
    let go = Arc::new(Notify::new());
    let release = go.clone();
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            Reply::Sse {
                headers: vec![],
                steps: vec![
                    Step::Raw(": a comment line\n\n".into()),
                    data(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}})),
                    Step::Wait(release.clone()),
                    // multi-line data is joined with newlines; still one JSON text
                    Step::Raw(format!("event: message\ndata: {{\"jsonrpc\":\"2.0\",\ndata: \"id\":{},\"result\":{{\"ok\":true}}}}\n\n", request["id"])),
                ],
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay.send(json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}}})).await;
    // The progress comes while the stream is still open (the answer is held back).
    let progress = relay.recv().await;
    assert_eq!(progress["method"], "notifications/progress");
    go.notify_one();
    let answer = relay.recv().await;
    assert_eq!(answer, json!({"jsonrpc":"2.0","id":5,"result":{"ok":true}}));
}

#[tokio::test]
async fn a_json_rpc_error_body_reaches_the_host_whatever_the_status() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            match request["method"].as_str().unwrap() {
                "a" => Reply::Json { status: 200, body: json!({"jsonrpc":"2.0","id":request["id"],"error":{"code":-32601,"message":"Method not found"}}).to_string(), headers: vec![] },
                "b" => Reply::Json { status: 400, body: json!({"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"Bad params","data":{"x":1}}}).to_string(), headers: vec![] },
                _ => Reply::Json { status: 502, body: "<html>bad gateway</html>".into(), headers: vec![] },
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let a = relay.call(json!(1), "a", json!({})).await;
    assert_eq!(a["error"]["code"], -32601);
    let b = relay.call(json!("b-id"), "b", json!({})).await;
    assert_eq!(
        b,
        json!({"jsonrpc":"2.0","id":"b-id","error":{"code":-32602,"message":"Bad params","data":{"x":1}}})
    );
    let c = relay.call(json!(3), "c", json!({})).await;
    assert_eq!(c["error"]["code"], -32000);
    assert_eq!(c["error"]["message"], "HTTP 502 from upstream");
    assert_eq!(c["error"]["data"]["httpStatus"], 502);
}

#[tokio::test]
async fn a_broken_stream_is_resumed_with_last_event_id_after_the_retry_interval() {
    let upstream = Upstream::start(|seen| {
        let request = seen.json();
        if seen.method == Method::GET {
            if seen.header("last-event-id").as_deref() == Some("e-2") {
                return Reply::Sse { headers: vec![], steps: vec![event("e-3", json!({"jsonrpc":"2.0","id":"call","result":{"resumed":true}}))] };
            }
            return Reply::Status(405);
        }
        if request["method"] == "tools/call" {
            return Reply::Sse {
                headers: vec![],
                steps: vec![
                    priming("e-1", Some(400)),
                    event("e-2", json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}})),
                ],
            };
        }
        basic(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"slow"}}))
        .await;
    assert_eq!(relay.recv().await["method"], "notifications/progress");
    assert_eq!(
        relay.recv().await,
        json!({"jsonrpc":"2.0","id":"call","result":{"resumed":true}})
    );

    let seen = upstream.seen();
    let post = seen
        .iter()
        .find(|s| s.rpc_method().as_deref() == Some("tools/call"))
        .unwrap();
    let resume = seen
        .iter()
        .find(|s| s.header("last-event-id").is_some())
        .unwrap();
    assert_eq!(
        resume.method,
        Method::GET,
        "resumed with GET, never by re-POSTing"
    );
    assert_eq!(
        resume.header("mcp-session-id").as_deref(),
        Some("session-1")
    );
    assert!(
        resume.at.duration_since(post.at) >= Duration::from_millis(400),
        "waited for retry:"
    );
    assert_eq!(upstream.posts_of("tools/call").len(), 1);
}

#[tokio::test]
async fn a_stream_that_closes_without_ids_or_an_answer_gets_an_error() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Sse { headers: vec![], steps: vec![data(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}))] })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}))
        .await;
    assert_eq!(relay.recv().await["method"], "notifications/message");
    let answer = relay.recv().await;
    assert_eq!(answer["id"], 1);
    // What happened, and what it means for a request that is not safe to repeat.
    assert_eq!(
        answer["error"]["message"],
        "upstream closed the stream before answering; the request may have executed and was not repeated"
    );
}

#[tokio::test]
async fn every_pending_request_gets_an_error_when_the_upstream_dies_mid_stream() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Sse {
            headers: vec![],
            steps: vec![data(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}})), Step::Abort],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    for id in 1..=3 {
        relay
            .send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"x"}}))
            .await;
    }
    let mut errors = std::collections::BTreeSet::new();
    while errors.len() < 3 {
        let message = relay.recv().await;
        if message.get("error").is_some() {
            assert!(
                message["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("upstream"),
                "{message}"
            );
            errors.insert(message["id"].as_i64().unwrap());
        }
    }
    assert_eq!(errors.into_iter().collect::<Vec<_>>(), vec![1, 2, 3]);
}

#[tokio::test]
async fn answers_come_back_in_the_order_the_upstream_gives_them() {
    let go = Arc::new(Notify::new());
    let release = go.clone();
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            let answer = json_reply(result_for(&request, json!({"n": request["id"]})));
            if request["id"] == 1 {
                Reply::Delayed(release.clone(), Box::new(answer))
            } else {
                answer
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}))
        .await;
    upstream
        .wait_until("the slow call", |s| {
            s.iter()
                .any(|s| s.json()["id"] == 1 && s.rpc_method().as_deref() == Some("tools/call"))
        })
        .await;
    relay
        .send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fast"}}))
        .await;
    // A slow call delays neither another call nor a ping.
    assert_eq!(relay.recv().await["id"], 2);
    assert!(relay.ping_through("p").await.is_empty());
    go.notify_one();
    assert_eq!(relay.recv().await["result"]["n"], 1);
}

#[tokio::test]
async fn resumption_gives_up_after_max_reconnects_attempts_without_progress() {
    let upstream = Upstream::start(|seen| {
        if seen.method == Method::GET {
            return match seen.header("last-event-id") {
                // A resumed stream that ends at once, without a single event.
                Some(_) => Reply::Sse {
                    headers: vec![],
                    steps: vec![],
                },
                None => Reply::Status(405),
            };
        }
        standard(seen).unwrap_or(Reply::Sse {
            headers: vec![],
            steps: vec![priming("r-1", Some(10))],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--max-reconnects", "2"]).await;
    relay.initialize().await;
    let answer = relay
        .call(json!(1), "tools/call", json!({"name": "x"}))
        .await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gave up after 2 resumption attempts"),
        "{answer}"
    );
    let resumes = upstream
        .seen()
        .into_iter()
        .filter(|s| s.header("last-event-id").is_some())
        .count();
    assert_eq!(resumes, 2);
}
