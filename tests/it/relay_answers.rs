//! The relay's answer guarantee as a property, on the real binary: random interleavings of
//! host requests, cancellations, upstream answers (JSON and SSE, duplicated, stray), busy
//! refusals, failures and stream cuts (resumable or not). Every non-cancelled id gets
//! exactly one answer, no cancelled id gets one, and nothing else reaches stdout but the
//! progress of a request the host made. `PROPTEST_CASES` sets how many interleavings run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::common::*;
use axum::http::Method;
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// What the upstream does with one request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    /// Answers with a JSON body.
    Json,
    /// Answers on an SSE stream, after a progress notification.
    Sse,
    /// Is refused with 503 (`Retry-After: 0`) this many times, then answered.
    Busy(u8),
    /// Gets an HTML 502 page.
    BadGateway,
    /// Its SSE stream is cut after its progress, with no event id: it cannot be resumed.
    Cut,
    /// Its SSE stream is cut after an event with an id; the resume brings the answer.
    Resumed,
    /// Hangs; the host cancels it; the upstream then answers anyway, late.
    Cancelled,
    /// Answered, and a copy of the answer also comes on the GET stream.
    Doubled,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        Just(Fate::Json),
        Just(Fate::Sse),
        (1u8..=2).prop_map(Fate::Busy),
        Just(Fate::BadGateway),
        Just(Fate::Cut),
        Just(Fate::Resumed),
        Just(Fate::Cancelled),
        Just(Fate::Doubled),
    ]
}

/// One step the test takes once every request is sent, in a random order.
#[derive(Debug, Clone, Copy)]
enum Move {
    /// Let request `n`'s upstream response go (for `Cancelled`: the host cancels it).
    Release(usize),
    /// An answer to an id nobody asked for, on the GET stream.
    Stray(usize),
}

fn scenario() -> impl Strategy<Value = (Vec<Fate>, Vec<Move>)> {
    (prop::collection::vec(fate(), 1..=6), 0usize..=2).prop_flat_map(|(fates, strays)| {
        let steps: Vec<Move> = (0..fates.len())
            .map(Move::Release)
            .chain((0..strays).map(Move::Stray))
            .collect();
        (Just(fates), Just(steps).prop_shuffle())
    })
}

fn id_of(n: usize) -> String {
    format!("r{n}")
}

/// The scripted upstream's shared state.
struct Script {
    fates: HashMap<String, Fate>,
    /// Each request's response waits for its release; a cut stream waits for its cut.
    release: HashMap<String, Arc<Notify>>,
    cut: HashMap<String, Arc<Notify>>,
    attempts: Mutex<HashMap<String, u8>>,
    /// The standalone GET stream, fed by the test.
    feed: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

fn respond(script: &Script, seen: &Seen) -> Reply {
    if seen.method == Method::GET {
        if let Some(last) = seen.header("last-event-id") {
            let id = last.trim_end_matches("-1").to_owned();
            let answer = json!({"jsonrpc":"2.0","id":id,"result":{"resumed":true}});
            return Reply::Sse {
                headers: vec![],
                steps: vec![event(&format!("{id}-2"), answer)],
            };
        }
        return match script.feed.lock().unwrap().take() {
            Some(feed) => Reply::Feed(feed),
            None => Reply::Status(405),
        };
    }
    if let Some(reply) = standard(seen) {
        return reply;
    }
    let request = seen.json();
    let id = request["id"].as_str().unwrap().to_owned();
    let fate = script.fates[&id];
    let release = script.release[&id].clone();
    let progress = data(
        json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":id,"progress":1}}),
    );
    let answer = result_for(&request, json!({"fate": format!("{fate:?}")}));
    let delayed = |reply: Reply| Reply::Delayed(release.clone(), Box::new(reply));
    match fate {
        Fate::Json | Fate::Doubled => delayed(json_reply(answer)),
        Fate::Sse => delayed(Reply::Sse {
            headers: vec![],
            steps: vec![progress, data(answer)],
        }),
        Fate::Busy(refusals) => {
            let attempt = {
                let mut attempts = script.attempts.lock().unwrap();
                let n = attempts.entry(id).or_default();
                *n += 1;
                *n
            };
            if attempt <= refusals {
                Reply::Json {
                    status: 503,
                    body: String::new(),
                    headers: vec![("retry-after", "0".into())],
                }
            } else {
                delayed(json_reply(answer))
            }
        }
        Fate::BadGateway => delayed(Reply::Json {
            status: 502,
            body: "<html><body><h1>502 Bad Gateway</h1></body></html>".into(),
            headers: vec![("content-type", "text/html".into())],
        }),
        Fate::Cut => delayed(Reply::Sse {
            headers: vec![],
            steps: vec![progress, Step::Wait(script.cut[&id].clone()), Step::Abort],
        }),
        Fate::Resumed => {
            let first = Step::Event {
                id: Some(format!("{id}-1")),
                retry: Some(5),
                data: Some(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":id,"progress":1}}).to_string()),
            };
            delayed(Reply::Sse {
                headers: vec![],
                steps: vec![first, Step::Wait(script.cut[&id].clone()), Step::Abort],
            })
        }
        Fate::Cancelled => Reply::Sse {
            headers: vec![],
            steps: vec![priming(&format!("{id}-p"), None), Step::Hang],
        },
    }
}

async fn run(fates: Vec<Fate>, steps: Vec<Move>) {
    let ids: Vec<String> = (0..fates.len()).map(id_of).collect();
    let (feed, fed) = mpsc::unbounded_channel();
    let script = Arc::new(Script {
        fates: ids.iter().cloned().zip(fates.iter().copied()).collect(),
        release: ids.iter().map(|id| (id.clone(), Arc::default())).collect(),
        cut: ids.iter().map(|id| (id.clone(), Arc::default())).collect(),
        attempts: Mutex::default(),
        feed: Mutex::new(Some(fed)),
    });
    let scripted = script.clone();
    let upstream = Upstream::start(move |seen| respond(&scripted, seen)).await;
    let mut relay = Relay::start(&upstream.url, &["--max-retries", "2"]).await;
    relay.initialize().await;
    upstream
        .wait_until("the GET stream", |s| {
            s.iter()
                .any(|s| s.method == Method::GET && s.header("last-event-id").is_none())
        })
        .await;
    for id in &ids {
        relay
            .send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"work"}}))
            .await;
    }
    // What the relay must drop: each late, duplicate and stray answer.
    let mut extras = 0;
    for step in &steps {
        match *step {
            Move::Release(n) if fates[n] == Fate::Cancelled => {
                let id = &ids[n];
                relay
                    .send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id}}))
                    .await;
                // Once the cancel is forwarded the relay has marked the id: answer late.
                upstream
                    .wait_until("the forwarded cancel", |seen| {
                        seen.iter()
                            .any(|s| s.json()["params"]["requestId"] == json!(id))
                    })
                    .await;
                let late = json!({"jsonrpc":"2.0","id":id,"result":{"late":true}});
                feed.send(sse_text(None, &late)).unwrap();
                extras += 1;
            }
            Move::Release(n) => {
                let id = &ids[n];
                script.release[id].notify_one();
                if fates[n] == Fate::Doubled {
                    let copy = json!({"jsonrpc":"2.0","id":id,"result":{"copy":true}});
                    feed.send(sse_text(None, &copy)).unwrap();
                    extras += 1;
                }
            }
            Move::Stray(n) => {
                let stray = json!({"jsonrpc":"2.0","id":format!("stray-{n}"),"result":{}});
                feed.send(sse_text(None, &stray)).unwrap();
                extras += 1;
            }
        }
    }

    let expected: Vec<&String> = ids
        .iter()
        .zip(&fates)
        .filter(|(_, fate)| **fate != Fate::Cancelled)
        .map(|(id, _)| id)
        .collect();
    let mut answers: HashMap<String, Value> = HashMap::new();
    while answers.len() < expected.len() {
        let message = relay.recv().await;
        if message["method"] == "notifications/progress" {
            let token = message["params"]["progressToken"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(ids.contains(&token), "progress nobody asked for: {message}");
            script.cut[&token].notify_one();
            continue;
        }
        let id = message["id"].as_str().unwrap_or_default().to_owned();
        assert!(
            expected.contains(&&id),
            "an answer that must not come: {message}"
        );
        assert!(
            answers.insert(id, message.clone()).is_none(),
            "a second answer: {message}"
        );
    }
    for (n, fate) in fates.iter().enumerate() {
        let Some(answer) = answers.get(&id_of(n)) else {
            continue;
        };
        let failed = matches!(fate, Fate::BadGateway | Fate::Cut);
        assert_eq!(answer.get("error").is_some(), failed, "{fate:?}: {answer}");
        if *fate == Fate::Resumed {
            assert_eq!(answer["result"]["resumed"], true, "{answer}");
        }
    }
    // Every extra answer reached the relay and was dropped; then the channel is alive and
    // nothing else came.
    wait_logged_count(
        || relay.stderr(),
        &[
            "matches no pending request",
            "dropped the late answer to a cancelled request",
        ],
        extras,
    )
    .await;
    let rest = relay.ping_through("alive").await;
    assert!(
        rest.iter().all(|m| m["method"] == "notifications/progress"),
        "after the answers: {rest:?}"
    );
    // No call that may have run was posted twice: only refused attempts were repeated.
    for (n, fate) in fates.iter().enumerate() {
        let posts = upstream
            .posts_of("tools/call")
            .iter()
            .filter(|s| s.json()["id"] == json!(id_of(n)))
            .count();
        // A cancelled call may have no POST at all, when the cancel overtook it.
        let allowed = match fate {
            Fate::Busy(refusals) => 1 + *refusals as usize,
            _ => 1,
        };
        assert!(posts <= allowed, "{fate:?} posted {posts} times");
        if *fate != Fate::Cancelled {
            assert_eq!(posts, allowed, "{fate:?}");
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 16,
        ..ProptestConfig::default()
    })]
    #[test]
    fn every_request_gets_exactly_one_answer_unless_cancelled((fates, steps) in scenario()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run(fates, steps));
    }
}
