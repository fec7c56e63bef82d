//! `mcp-stdio serve` answering 2026-07-28 clients: the validation ladder, the pooled
//! backend, the child's questions as `input_required` rounds, `subscriptions/listen`,
//! `Mcp-Param-*` checks, and a 2026-07-28 child reached through the era probe.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

use crate::common::modern::CLIENT_CAPABILITIES;
use crate::common::serve::*;

impl Serve {
    /// A 2026-07-28 `tools/call` of `name` without arguments.
    async fn tool(&self, id: u64, name: &str) -> Answer {
        self.modern(json!(id), "tools/call", json!({"name": name}), Some(name))
            .await
    }

    /// The pooled backend answers a 2026-07-28 `echo` call.
    async fn assert_echoes(&self, id: u64, text: &str) {
        let answer = self
            .modern(
                json!(id),
                "tools/call",
                json!({"name": "echo", "arguments": {"text": text}}),
                Some("echo"),
            )
            .await;
        assert_eq!(text_of(&answer), text);
    }
}

#[tokio::test]
async fn modern_clients_are_served_from_one_pooled_child_with_remapped_ids() {
    let serve = Serve::start(&[]).await;
    let discover = serve
        .modern(json!(1), "server/discover", json!({}), None)
        .await;
    assert_eq!(discover.status, 200, "{}", discover.body);
    let result = &discover.json()["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "stdio-fixture"
    );
    assert_eq!(result["cacheScope"], "private");
    let list = serve.modern(json!(2), "tools/list", json!({}), None).await;
    assert_eq!(list.json()["result"]["resultType"], "complete");
    assert_eq!(list.json()["result"]["ttlMs"], 0);
    // Sixteen clients at once, every one using id 1: each gets its own answer.
    let calls = (0..16).map(|n| {
        serve.modern(
            json!(1),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": format!("call {n}")}}),
            Some("echo"),
        )
    });
    let answers = futures_util::future::join_all(calls).await;
    for (n, answer) in answers.iter().enumerate() {
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.json()["id"], 1);
        assert_eq!(
            answer.json()["result"]["content"][0]["text"],
            format!("call {n}")
        );
        assert_eq!(answer.json()["result"]["resultType"], "complete");
    }
    // One child for them all.
    let pid = |a: &Answer| {
        a.json()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = serve.tool(3, "whoami").await;
    let second = serve.tool(4, "whoami").await;
    assert_eq!(pid(&first), pid(&second));
    // Progress comes back with the client's own token.
    let progress = serve
        .modern(
            json!(5),
            "tools/call",
            json!({"name": "progress", "_meta": {"progressToken": "mine"}}),
            Some("progress"),
        )
        .await;
    let events = progress.events();
    assert_eq!(
        events[0]["params"]["progressToken"], "mine",
        "{}",
        progress.body
    );
    assert_eq!(events.last().unwrap()["id"], 5);
    // Legacy clients are not affected: they get their own session and child.
    let session = serve.initialize().await;
    assert_ne!(
        pid(&serve.call(&session, 1, "whoami", json!({})).await),
        pid(&first)
    );
}

#[tokio::test]
async fn the_modern_ladder_answers_with_the_specs_statuses() {
    let serve = Serve::start(&[]).await;
    // A header that disagrees, or is missing: 400 -32020.
    let (_, body) = modern_request(
        json!(1),
        "tools/call",
        json!({"name": "echo"}),
        Some("echo"),
    );
    let no_headers = serve.send("POST", "/mcp", &[], &body).await;
    assert_eq!(
        (
            no_headers.status,
            no_headers.json()["error"]["code"].as_i64()
        ),
        (400, Some(-32020))
    );
    let wrong_name = serve
        .modern(
            json!(2),
            "tools/call",
            json!({"name": "echo"}),
            Some("other"),
        )
        .await;
    assert_eq!(
        (
            wrong_name.status,
            wrong_name.json()["error"]["code"].as_i64()
        ),
        (400, Some(-32020))
    );
    // An unsupported version: 400 -32022 with the list.
    let old = serve
        .send("POST", "/mcp", &[("mcp-protocol-version", "2099-01-01"), ("mcp-method", "tools/list")],
            &json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}).to_string())
        .await;
    assert_eq!(
        (old.status, old.json()["error"]["code"].as_i64()),
        (400, Some(-32022))
    );
    assert_eq!(
        old.json()["error"]["data"]["supported"],
        json!(["2026-07-28"])
    );
    // A broken envelope: 400 -32602; a modern header on a body without one: 400 -32602.
    let broken = serve
        .send("POST", "/mcp", &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")],
            &json!({"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}).to_string())
        .await;
    assert_eq!(
        (broken.status, broken.json()["error"]["code"].as_i64()),
        (400, Some(-32602))
    );
    let headless = serve
        .send(
            "POST",
            "/mcp",
            &[("mcp-protocol-version", "2026-07-28")],
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
        )
        .await;
    assert_eq!(
        (headless.status, headless.json()["error"]["code"].as_i64()),
        (400, Some(-32602))
    );
    // An unknown method: 404 -32601.
    let ping = serve.modern(json!(6), "ping", json!({}), None).await;
    assert_eq!(
        (ping.status, ping.json()["error"]["code"].as_i64()),
        (404, Some(-32601))
    );
}

#[tokio::test]
async fn closing_a_modern_stream_cancels_the_call_in_the_child() {
    let serve = Serve::start(&["--log-level", "debug"]).await;
    let (headers, body) = modern_request(
        json!(1),
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 5000}}),
        Some("slow"),
    );
    let mut request = http::Request::builder()
        .method("POST")
        .uri(&serve.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in &headers {
        request = request.header(k, v);
    }
    let pending = serve
        .http
        .request(request.body(Full::new(Bytes::from(body))).unwrap());
    // Give the call time to reach the child, then walk away from it.
    let _ = tokio::time::timeout(Duration::from_millis(300), pending).await;
    serve
        .wait_stderr("ended unanswered; cancelled in the child")
        .await;
    // The backend is still there for the next client.
    serve.assert_echoes(2, "after").await;
}

#[tokio::test]
async fn a_dead_pooled_child_fails_its_calls_and_is_replaced() {
    let serve = Serve::start(&[]).await;
    let before = serve.tool(1, "whoami").await;
    let crash = serve.tool(2, "crash").await;
    assert!(crash.body.contains("exited"), "{}", crash.body);
    assert_eq!(crash.json()["error"]["code"], -32603);
    let after = serve.tool(3, "whoami").await;
    assert_eq!(after.status, 200, "{}", after.body);
    assert_ne!(
        after.json()["result"]["content"][0]["text"],
        before.json()["result"]["content"][0]["text"],
        "a new child"
    );
}

#[tokio::test]
async fn modern_only_refuses_the_handshake_era() {
    let serve = Serve::start(&["--modern-only"]).await;
    let init = serve
        .post(None, json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    assert_eq!(
        (init.status, init.json()["error"]["code"].as_i64()),
        (400, Some(-32022))
    );
    assert_eq!(serve.send("GET", "/mcp", &[], "").await.status, 405);
    assert_eq!(serve.send("DELETE", "/mcp", &[], "").await.status, 405);
    let works = serve.modern(json!(1), "tools/list", json!({}), None).await;
    assert_eq!(works.status, 200);
}

/// `tools/call ask` declaring `capabilities`, optionally a retry with `state` and `responses`.
fn ask(capabilities: Value, retry: Option<(&str, Value)>) -> Value {
    let mut params = json!({"name": "ask", "arguments": {},
        "_meta": {CLIENT_CAPABILITIES: capabilities}});
    if let Some((state, responses)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = responses;
    }
    params
}

/// The first text content of a result, or the whole answer when there is none.
fn text_of(answer: &Answer) -> String {
    answer.json()["result"]["content"][0]["text"]
        .as_str()
        .map_or_else(|| answer.body.clone(), str::to_owned)
}

fn code(answer: &Answer) -> (u16, Option<i64>) {
    (answer.status, answer.json()["error"]["code"].as_i64())
}

#[tokio::test]
async fn a_legacy_childs_question_becomes_an_input_required_round() {
    let serve = Serve::start(&[]).await;
    let can_elicit = json!({"elicitation": {}});
    let first = serve
        .modern(
            json!(1),
            "tools/call",
            ask(can_elicit.clone(), None),
            Some("ask"),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let result = &first.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{result}");
    let question = &result["inputRequests"]["elicitation"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "name?");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let accept = json!({"elicitation": {"action": "accept", "content": {"name": "Ada"}}});

    // A tampered state, or the state shown for another tool, resumes nothing.
    let tampered = format!("{state}x");
    let retry = ask(can_elicit.clone(), Some((&tampered, accept.clone())));
    let answer = serve
        .modern(json!(2), "tools/call", retry, Some("ask"))
        .await;
    assert_eq!(code(&answer), (400, Some(-32602)), "{}", answer.body);
    let mut elsewhere = ask(can_elicit.clone(), Some((&state, accept.clone())));
    elsewhere["name"] = json!("echo");
    let answer = serve
        .modern(json!(3), "tools/call", elsewhere, Some("echo"))
        .await;
    assert_eq!(code(&answer), (400, Some(-32602)), "{}", answer.body);

    // Malformed answers leave the call parked; an unanswered question is asked again.
    let retry = ask(
        can_elicit.clone(),
        Some((&state, json!({"elicitation": 5}))),
    );
    let answer = serve
        .modern(json!(4), "tools/call", retry, Some("ask"))
        .await;
    assert_eq!(code(&answer), (400, Some(-32602)), "{}", answer.body);
    let retry = ask(can_elicit.clone(), Some((&state, json!({"other": {}}))));
    let again = serve
        .modern(json!(5), "tools/call", retry, Some("ask"))
        .await;
    assert_eq!(again.json()["result"]["resultType"], "input_required");
    assert_eq!(again.json()["result"]["requestState"], json!(state));

    // The real answer reaches the child, whose call completes.
    let retry = ask(can_elicit.clone(), Some((&state, accept.clone())));
    let done = serve
        .modern(json!(6), "tools/call", retry, Some("ask"))
        .await;
    assert_eq!(done.json()["id"], 6);
    assert_eq!(done.json()["result"]["content"][0]["text"], "asked: Ada");
    assert_eq!(done.json()["result"]["resultType"], "complete");

    // A state resumes its call once.
    let retry = ask(can_elicit, Some((&state, accept)));
    let replay = serve
        .modern(json!(7), "tools/call", retry, Some("ask"))
        .await;
    assert_eq!(code(&replay), (400, Some(-32602)), "{}", replay.body);
}

#[tokio::test]
async fn a_question_the_client_did_not_declare_fails_with_32021_and_cancels_the_call() {
    let serve = Serve::start(&["--log-level", "debug"]).await;
    let answer = serve
        .modern(
            json!(1),
            "tools/call",
            ask(json!({"sampling": {}}), None),
            Some("ask"),
        )
        .await;
    assert_eq!(code(&answer), (400, Some(-32021)), "{}", answer.body);
    assert_eq!(
        answer.json()["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
    serve
        .wait_stderr("ended unanswered; cancelled in the child")
        .await;
    serve.assert_echoes(2, "on").await;
}

#[tokio::test]
async fn a_roots_question_the_client_did_not_declare_is_refused_to_the_child_and_the_call_goes_on()
{
    // Servers ask for roots on their own schedule (server-everything 350 ms after its
    // handshake, during whatever call runs then): failing that call with -32021 lost it.
    let serve = Serve::start(&["--log-level", "debug"]).await;
    let roots = |capabilities: Value| json!({"name": "roots", "arguments": {}, "_meta": {CLIENT_CAPABILITIES: capabilities}});
    let answer = serve
        .modern(
            json!(1),
            "tools/call",
            roots(json!({"sampling": {}})),
            Some("roots"),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["result"]["resultType"], "complete");
    assert_eq!(text_of(&answer), "roots refused: -32601");
    serve
        .wait_stderr("which this request's client did not declare; refused to the child")
        .await;
    // A client that declared roots is still asked, in an input_required round.
    let asked = serve
        .modern(
            json!(2),
            "tools/call",
            roots(json!({"roots": {}})),
            Some("roots"),
        )
        .await;
    let result = &asked.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{}", asked.body);
    let (key, request) = result["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["method"], "roots/list");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let mut retry = roots(json!({"roots": {}}));
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({key.as_str(): {"roots": [{"uri": "file:///w"}]}});
    let done = serve
        .modern(json!(3), "tools/call", retry, Some("roots"))
        .await;
    assert_eq!(text_of(&done), "roots: 1", "{}", done.body);
}

#[tokio::test]
async fn a_question_while_no_call_runs_is_refused_to_the_child_saying_so() {
    let serve = Serve::start(&["--log-level", "debug"]).await;
    // Once the gateway has refused the question (and only then: a `heard` call in flight
    // when the child asks would be given the question), the fixture records the reply.
    let heard_after = |before: String| {
        let serve = &serve;
        async move {
            let heard = crate::common::eventually("the child records the reply", async || {
                let heard = text_of(&serve.tool(2, "heard").await);
                (heard != before)
                    .then_some(heard)
                    .ok_or_else(|| before.clone())
            })
            .await;
            let reply: Value = serde_json::from_str(&heard).expect(&heard);
            assert_eq!(reply["id"], "late");
            reply["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    assert_eq!(text_of(&serve.tool(1, "ask-later").await), "will ask");
    serve.wait_stderr("why=no call is in progress").await;
    assert_eq!(
        heard_after(String::new()).await,
        "no call is in progress: a 2026-07-28 client can be asked only during a call"
    );
    let before = text_of(&serve.tool(3, "heard").await);
    // A call parked on its own question cannot take another one.
    let parked = serve
        .modern(
            json!(4),
            "tools/call",
            ask(json!({"elicitation": {}}), None),
            Some("ask"),
        )
        .await;
    assert_eq!(parked.json()["result"]["resultType"], "input_required");
    assert_eq!(text_of(&serve.tool(5, "ask-later").await), "will ask");
    serve.wait_stderr("why=every call in progress").await;
    assert_eq!(
        heard_after(before).await,
        "every call in progress is already waiting for the answer to a question; ask one question at a time"
    );
    serve.assert_echoes(6, "still serving").await;
}

#[tokio::test]
async fn an_unanswered_round_expires_and_its_state_with_it() {
    let serve = Serve::start(&["--input-timeout", "1"]).await;
    let can_elicit = json!({"elicitation": {}});
    let first = serve
        .modern(
            json!(1),
            "tools/call",
            ask(can_elicit.clone(), None),
            Some("ask"),
        )
        .await;
    let state = first.json()["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    serve
        .wait_stderr("was not answered within --input-timeout")
        .await;
    let accept = json!({"elicitation": {"action": "accept", "content": {"name": "Ada"}}});
    let late = serve
        .modern(
            json!(2),
            "tools/call",
            ask(can_elicit, Some((&state, accept))),
            Some("ask"),
        )
        .await;
    assert_eq!(code(&late), (400, Some(-32602)), "{}", late.body);
    serve.assert_echoes(3, "on").await;
}

#[tokio::test]
async fn listen_acknowledges_what_the_child_can_deliver_and_carries_its_changes() {
    let serve = Serve::start(&[]).await;
    let asked = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}});
    let response = serve
        .open_modern(json!("l-1"), "subscriptions/listen", asked)
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s| s.contains("acknowledged")).await;
    let ack = &sse_data(&seen)[0];
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l-1"
    );
    // The fixture declares tools.listChanged only.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );

    let announce = serve.tool(2, "announce").await;
    assert_eq!(announce.status, 200, "{}", announce.body);
    read_until(&mut body, &mut seen, |s| s.contains("list_changed")).await;
    let change = sse_data(&seen).pop().unwrap();
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l-1"
    );

    let no_filter = serve
        .modern(json!(3), "subscriptions/listen", json!({}), None)
        .await;
    assert_eq!(code(&no_filter), (400, Some(-32602)), "{}", no_filter.body);
}

#[tokio::test]
async fn mcp_param_headers_are_checked_against_the_tools_annotations() {
    let serve = Serve::start(&[]).await;
    let call = |id: u64, headers: &'static [(&'static str, &'static str)]| {
        serve.modern_with(
            json!(id),
            "tools/call",
            json!({"name": "region", "arguments": {"region": "eu"}}),
            Some("region"),
            headers,
        )
    };
    let missing = call(1, &[]).await;
    assert_eq!(code(&missing), (400, Some(-32020)), "{}", missing.body);
    assert!(
        missing.body.contains("Mcp-Param-Region is missing"),
        "{}",
        missing.body
    );
    let plain = call(2, &[("mcp-param-region", "eu")]).await;
    assert_eq!(text_of(&plain), "eu");
    let encoded = call(3, &[("mcp-param-region", "=?base64?ZXU=?=")]).await;
    assert_eq!(text_of(&encoded), "eu");
    let other = call(4, &[("mcp-param-region", "us")]).await;
    assert_eq!(code(&other), (400, Some(-32020)), "{}", other.body);
    let broken = call(5, &[("mcp-param-region", "=?base64?ZXU?=")]).await;
    assert_eq!(code(&broken), (400, Some(-32020)), "{}", broken.body);
}

#[tokio::test]
async fn the_era_probe_finds_a_modern_child_which_then_gets_the_envelope() {
    let fixture = fixture();
    let modern = Serve::start_with(&[], &[fixture.as_str()], &[("FIXTURE_ERA", "modern")]).await;
    let discover = modern
        .modern(json!(1), "server/discover", json!({}), None)
        .await;
    // The child's own answer, not one made from an initialize result.
    assert_eq!(
        discover.json()["result"]["serverInfo"]["name"],
        "modern-fixture",
        "{}",
        discover.body
    );
    let meta = modern.tool(2, "meta").await;
    assert_eq!(meta.json()["result"]["content"][0]["text"], "2026-07-28");

    // Told it is handshake-era, the gateway runs initialize and strips the envelope.
    let legacy = Serve::start_with(
        &["--child-era", "legacy"],
        &[fixture.as_str()],
        &[("FIXTURE_ERA", "modern")],
    )
    .await;
    let discover = legacy
        .modern(json!(1), "server/discover", json!({}), None)
        .await;
    assert_eq!(
        discover.json()["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "stdio-fixture"
    );
    let meta = legacy.tool(2, "meta").await;
    assert_eq!(meta.json()["result"]["content"][0]["text"], "none");
}

#[tokio::test]
async fn an_idle_pooled_child_is_reaped_and_replaced_but_a_busy_one_is_not() {
    let serve = Serve::start(&["--session-idle-ttl", "1"]).await;
    // A call three times the idle TTL long: the child is busy, never idle.
    let slow = serve
        .modern(
            json!(1),
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 3000}}),
            Some("slow"),
        )
        .await;
    assert_eq!(text_of(&slow), "slept");
    assert!(!serve.stderr().contains("idle for --session-idle-ttl"));
    let whoami = |id: u64| {
        serve.modern(
            json!(id),
            "tools/call",
            json!({"name": "whoami"}),
            Some("whoami"),
        )
    };
    let before = whoami(2).await.json()["result"]["content"][0]["text"].clone();
    serve
        .wait_stderr("idle for --session-idle-ttl; ending it")
        .await;
    let after = whoami(3).await.json()["result"]["content"][0]["text"].clone();
    assert_ne!(before, after, "a new child after the idle one was reaped");
}

#[tokio::test]
async fn a_silent_probe_means_the_handshake_era_after_child_probe_timeout() {
    let fixture = fixture();
    let serve = Serve::start_with(
        &["--child-probe-timeout", "0.5"],
        &[fixture.as_str()],
        &[("FIXTURE_ERA", "silent")],
    )
    .await;
    serve.assert_echoes(1, "hi").await;
    assert!(
        serve
            .stderr()
            .contains("did not answer server/discover in time"),
        "{}",
        serve.stderr()
    );
}

#[tokio::test]
async fn the_pool_shares_max_sessions_with_handshake_era_sessions() {
    let serve = Serve::start(&["--max-sessions", "1"]).await;
    serve.initialize().await;
    let refused = serve
        .modern(
            json!(1),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
            Some("echo"),
        )
        .await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused.body.contains("--max-sessions (1)"),
        "{}",
        refused.body
    );
}

#[tokio::test]
async fn a_child_that_refuses_initialize_with_32022_proves_the_probe_wrong() {
    let fixture = fixture();
    let serve = Serve::start_with(
        &["--child-probe-timeout", "0.3"],
        &[fixture.as_str()],
        &[("FIXTURE_ERA", "silent-modern")],
    )
    .await;
    let meta = serve.tool(1, "meta").await;
    assert_eq!(text_of(&meta), "2026-07-28");
    assert!(
        serve.stderr().contains("the era probe was wrong"),
        "{}",
        serve.stderr()
    );
    // From now on every child is a 2026-07-28 one, without a handshake to refuse.
    serve.assert_echoes(2, "on").await;
}

#[tokio::test]
async fn a_listen_that_falls_behind_replay_buffer_is_ended_without_its_result() {
    let serve = Serve::start(&["--replay-buffer", "2"]).await;
    let asked = json!({"notifications": {"toolsListChanged": true}});
    let response = serve
        .open_modern(json!("l-1"), "subscriptions/listen", asked)
        .await;
    let mut body = response.into_body();
    let mut seen = String::new();
    // The stream is alive: its acknowledgement came.
    read_until(&mut body, &mut seen, |s| s.contains("acknowledged")).await;
    // A hundred changes in one burst, two kept: the listen lost some and must resync.
    let burst = serve.tool(2, "announce-burst").await;
    assert_eq!(burst.status, 200, "{}", burst.body);
    let rest = tokio::time::timeout(DEADLINE, http_body_util::BodyExt::collect(body))
        .await
        .expect("the listen ended")
        .unwrap()
        .to_bytes();
    let rest = String::from_utf8_lossy(&rest);
    assert!(!rest.contains("resultType"), "no graceful result: {rest}");
    serve.wait_stderr("fell behind").await;
}
