//! The fault suite, relay side: upstream failures injected on purpose, each in its own test.
//! Every test checks the answer guarantee (each request exactly one answer, nothing else on
//! stdout) and that no tool call was ever posted twice. `docs/architecture.md` ("Fault
//! suite") maps each fault to its test, here or elsewhere.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::common::*;
use axum::http::Method;
use serde_json::{Value, json};

/// Sends every request, then reads exactly one line per request (in any order) and proves
/// with a ping that nothing else followed.
async fn answers_to(relay: &mut Relay, ids: &[&str]) -> HashMap<String, Value> {
    for id in ids {
        relay
            .send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"work","arguments":{"id":id}}}))
            .await;
    }
    let mut answers = HashMap::new();
    for _ in ids {
        let answer = relay.recv().await;
        let id = answer["id"]
            .as_str()
            .expect("an answer with a string id")
            .to_owned();
        assert!(
            ids.contains(&id.as_str()),
            "an answer nobody asked for: {answer}"
        );
        assert!(
            answers.insert(id, answer.clone()).is_none(),
            "a second answer: {answer}"
        );
    }
    let rest = relay.ping_through("alive").await;
    assert!(
        rest.is_empty(),
        "more than one answer per request: {rest:?}"
    );
    answers
}

fn status(code: u16, retry_after: &str) -> Reply {
    Reply::Json {
        status: code,
        body: String::new(),
        headers: vec![("retry-after", retry_after.into())],
    }
}

#[tokio::test]
async fn a_storm_of_429_and_503_is_retried_within_max_retries_and_no_call_runs_twice() {
    // Call `bN` is refused N times (429 and 503 in turn) before it runs; `storm` always is.
    let attempts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let counts = attempts.clone();
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            let id = request["id"].as_str().unwrap().to_owned();
            let n = {
                let mut counts = counts.lock().unwrap();
                let n = counts.entry(id.clone()).or_default();
                *n += 1;
                *n
            };
            let refusals = match id.as_str() {
                "storm" => usize::MAX,
                other => other[1..].parse().unwrap(),
            };
            if n <= refusals {
                status(if n % 2 == 1 { 429 } else { 503 }, "0")
            } else {
                json_reply(result_for(&request, json!({"ran": id})))
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--max-retries", "2"]).await;
    relay.initialize().await;
    let answers = answers_to(&mut relay, &["b0", "b1", "b2", "storm"]).await;
    for id in ["b0", "b1", "b2"] {
        assert_eq!(answers[id]["result"]["ran"], id, "{}", answers[id]);
    }
    let storm = &answers["storm"]["error"];
    assert_eq!(storm["data"]["httpStatus"], 429, "{storm}");
    let posts = attempts.lock().unwrap().clone();
    // Each refused attempt was not executed; each call ran once; the storm stopped at the bound.
    assert_eq!(posts["b0"], 1);
    assert_eq!(posts["b1"], 2);
    assert_eq!(posts["b2"], 3);
    assert_eq!(posts["storm"], 3, "1 attempt + --max-retries 2");
}

#[tokio::test]
async fn an_sse_answer_cut_mid_call_is_resumed_or_failed_and_never_posted_again() {
    // `resumable` is cut after an event with an id (the server offers a resume); `lost` is
    // cut with no id (nothing to resume from). Each is cut once the host has seen its
    // progress, so the cut falls mid-call. Neither may be posted a second time.
    let cuts: Arc<HashMap<&'static str, Arc<tokio::sync::Notify>>> = Arc::new(
        [("resumable", Arc::default()), ("lost", Arc::default())]
            .into_iter()
            .collect(),
    );
    let cut = cuts.clone();
    let upstream = Upstream::start(move |seen| {
        if seen.method == Method::GET {
            return match seen.header("last-event-id").as_deref() {
                Some("r1") => Reply::Sse {
                    headers: vec![],
                    steps: vec![event(
                        "r2",
                        json!({"jsonrpc":"2.0","id":"resumable","result":{"resumed":true}}),
                    )],
                },
                _ => Reply::Status(405),
            };
        }
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            let id = request["id"].as_str().unwrap();
            let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":id,"progress":1}});
            let first = match id {
                "resumable" => Step::Event {
                    id: Some("r1".into()),
                    retry: Some(10),
                    data: Some(progress.to_string()),
                },
                _ => data(progress),
            };
            Reply::Sse {
                headers: vec![],
                steps: vec![first, Step::Wait(cut[id].clone()), Step::Abort],
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    for id in ["resumable", "lost"] {
        relay
            .send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"work"}}))
            .await;
    }
    let mut answers = HashMap::new();
    while answers.len() < 2 {
        let message = relay.recv().await;
        if message["method"] == "notifications/progress" {
            let token = message["params"]["progressToken"].as_str().unwrap();
            cuts[token].notify_one();
            continue;
        }
        let id = message["id"].as_str().unwrap().to_owned();
        assert!(
            answers.insert(id, message.clone()).is_none(),
            "twice: {message}"
        );
    }
    assert_eq!(
        answers["resumable"]["result"]["resumed"], true,
        "{answers:?}"
    );
    let lost = answers["lost"]["error"]["message"].as_str().unwrap();
    assert!(lost.contains("may have executed"), "{lost}");
    let rest = relay.ping_through("alive").await;
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(
        upstream.posts_of("tools/call").len(),
        2,
        "one POST per call"
    );
}

#[tokio::test]
async fn an_html_502_page_is_an_error_naming_the_status_and_the_call_is_not_retried() {
    let page = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>";
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or(Reply::Json {
            status: 502,
            body: page.into(),
            headers: vec![("content-type", "text/html".into())],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let answers = answers_to(&mut relay, &["c1"]).await;
    let error = &answers["c1"]["error"];
    assert_eq!(error["data"]["httpStatus"], 502, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("502"), "{message}");
    assert!(
        !message.contains("<html>"),
        "the page is not the message: {message}"
    );
    assert_eq!(upstream.posts_of("tools/call").len(), 1);
}

#[tokio::test]
async fn stray_duplicate_and_unknown_answers_never_reach_the_host() {
    let go = Arc::new(tokio::sync::Notify::new());
    let later = go.clone();
    let upstream = Upstream::start(move |seen| {
        if seen.method == Method::GET {
            // Another copy of a1's answer, and an answer to an id never asked.
            return Reply::Sse {
                headers: vec![],
                steps: vec![
                    Step::Wait(later.clone()),
                    event("g1", json!({"jsonrpc":"2.0","id":"a1","result":{"copy":3}})),
                    event(
                        "g2",
                        json!({"jsonrpc":"2.0","id":"never-asked","result":{}}),
                    ),
                    Step::Hang,
                ],
            };
        }
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            Reply::Sse {
                headers: vec![],
                steps: vec![
                    data(json!({"jsonrpc":"2.0","id":"stray","result":{}})),
                    data(result_for(&request, json!({"copy":1}))),
                    data(result_for(&request, json!({"copy":2}))),
                ],
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    upstream
        .wait_until("the GET stream", |s| {
            s.iter().any(|s| s.method == Method::GET)
        })
        .await;
    let answers = answers_to(&mut relay, &["a1"]).await;
    assert_eq!(answers["a1"]["result"]["copy"], 1);
    go.notify_one();
    // The extras that reach the relay were seen and dropped: the stray before the answer
    // and both on the GET stream (the second copy on the POST stream is never read: the
    // relay ends that stream at its answer). Then the channel is shown still alive.
    wait_logged_count(|| relay.stderr(), &["matches no pending request"], 3).await;
    let rest = relay.ping_through("alive-2").await;
    assert!(rest.is_empty(), "an extra answer leaked: {rest:?}");
}

#[tokio::test]
async fn an_upstream_that_accepts_a_call_and_never_answers_gets_one_timeout_error() {
    // The stream opens (headers and a priming event) and then nothing ever comes.
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Sse {
            headers: vec![],
            steps: vec![priming("p1", None), Step::Hang],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--timeout-read", "0.5"]).await;
    relay.initialize().await;
    let answers = answers_to(&mut relay, &["quiet"]).await;
    let message = answers["quiet"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("--timeout-read"), "{message}");
    assert_eq!(upstream.posts_of("tools/call").len(), 1);
}
