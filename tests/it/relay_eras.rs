//! The four era combinations: a legacy or 2026-07-28 host in front of a legacy or
//! 2026-07-28 server, against fake upstreams that check what the spec makes them check.

use crate::common::*;
use axum::http::Method;
use serde_json::{Value, json};

use crate::common::modern::{MODERN, envelope};

/// The next message that is not a notification (the fake's listen stream may interleave).
async fn next_non_notification(relay: &mut Relay) -> Value {
    loop {
        let message = relay.recv().await;
        if message.get("id").is_some() {
            return message;
        }
    }
}

async fn call(relay: &mut Relay, id: Value, method: &str, params: Value) -> Value {
    relay
        .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    let answer = next_non_notification(relay).await;
    assert_eq!(answer["id"], id, "unexpected message: {answer}");
    answer
}

fn error_reply(status: u16, id: &Value, code: i64, message: &str) -> Reply {
    Reply::Json {
        status,
        body: json!({"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message}}).to_string(),
        headers: vec![],
    }
}

/// A 2026-07-28 server: POST only, validates the mirrored headers against the body, and
/// offers tools that exercise headers, input rounds and subscriptions.
pub fn modern_server(seen: &Seen) -> Reply {
    if seen.method != Method::POST {
        return Reply::Status(405);
    }
    let request = seen.json();
    let id = request["id"].clone();
    let method = request["method"].as_str().unwrap_or_default();
    if request.get("id").is_none() {
        return Reply::Status(202);
    }
    let meta = &request["params"]["_meta"];
    if method == "initialize"
        || meta
            .get("io.modelcontextprotocol/protocolVersion")
            .is_none()
    {
        return Reply::Json {
            status: 400,
            body: json!({"jsonrpc":"2.0","id":id,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":[MODERN]}}}).to_string(),
            headers: vec![],
        };
    }
    if seen.header("mcp-protocol-version").as_deref() != Some(MODERN)
        || seen.header("mcp-method").as_deref() != Some(method)
        || seen.header("mcp-session-id").is_some()
    {
        return error_reply(400, &id, -32020, "Header mismatch");
    }
    match method {
        "server/discover" => json_reply(result_for(
            &request,
            json!({
                "resultType": "complete", "supportedVersions": [MODERN],
                "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}, "logging": {}},
                "instructions": "modern instructions", "ttlMs": 60000, "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-fake", "version": "7"}}
            }),
        )),
        "tools/list" => json_reply(result_for(
            &request,
            json!({
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "tools": [
                {"name": "weather", "inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "days": {"type": "integer", "x-mcp-header": "Days"}}}},
                {"name": "broken", "inputSchema": {"type": "object", "properties": {
                    "score": {"type": "number", "x-mcp-header": "Score"}}}},
                {"name": "ask", "inputSchema": {"type": "object"}},
                {"name": "loop", "inputSchema": {"type": "object"}}
            ]}),
        )),
        "tools/call" => tool_call(seen, &request),
        // The tasks extension routes by task: the header must name the body's task.
        "tasks/get"
            if seen.header("mcp-name").as_deref() == request["params"]["taskId"].as_str() =>
        {
            json_reply(result_for(
                &request,
                json!({"resultType": "complete", "taskId": request["params"]["taskId"], "status": "working",
                       "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:00Z", "ttlMs": null}),
            ))
        }
        "tasks/get" => error_reply(400, &id, -32020, "Mcp-Name does not name the task"),
        "subscriptions/listen" => {
            let sub = id.clone();
            Reply::Sse {
                headers: vec![],
                steps: vec![
                    data(
                        json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged",
                        "params":{"_meta":{"io.modelcontextprotocol/subscriptionId":sub},"notifications":request["params"]["notifications"]}}),
                    ),
                    data(
                        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed",
                        "params":{"_meta":{"io.modelcontextprotocol/subscriptionId":sub}}}),
                    ),
                    Step::Hang,
                ],
            }
        }
        _ => error_reply(404, &id, -32601, "Method not found"),
    }
}

fn tool_call(seen: &Seen, request: &Value) -> Reply {
    let params = &request["params"];
    let text = |t: String| json!({"resultType":"complete","content":[{"type":"text","text":t}]});
    match params["name"].as_str().unwrap_or_default() {
        "weather" => {
            let region = seen.header("mcp-param-region").unwrap_or_default();
            let days = seen.header("mcp-param-days").unwrap_or_default();
            let name = seen.header("mcp-name").unwrap_or_default();
            json_reply(result_for(
                request,
                text(format!("{name} region={region} days={days}")),
            ))
        }
        "ask" => match params.get("inputResponses") {
            None => json_reply(result_for(
                request,
                json!({
                    "resultType": "input_required",
                    "inputRequests": {"who": {"method": "elicitation/create", "params": {
                        "message": "Who are you?", "requestedSchema": {"type":"object","properties":{"name":{"type":"string"}}}}}},
                    "requestState": "state-\u{e9}-1"
                }),
            )),
            Some(responses) => json_reply(result_for(
                request,
                text(format!(
                    "answer={} state={}",
                    responses["who"], params["requestState"]
                )),
            )),
        },
        // A retired code a 2026-07-28 server must not send (and the relay must not pass).
        "retired" => error_reply(200, &request["id"], -32002, "Resource not found"),
        // An older-style result: no resultType.
        "bare" => json_reply(result_for(request, json!({"content": []}))),
        "loop" => json_reply(result_for(
            request,
            json!({
                "resultType": "input_required", "requestState": "again"
            }),
        )),
        _ => error_reply(200, &request["id"], -32602, "Unknown tool"),
    }
}

#[tokio::test]
async fn a_legacy_host_gets_initialize_ping_and_tools_from_a_modern_server() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let init = relay.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "modern-fake");
    assert_eq!(init["result"]["instructions"], "modern instructions");
    assert!(
        upstream.posts_of("initialize").is_empty(),
        "initialize is answered by the relay"
    );

    let pong = call(&mut relay, json!("p"), "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));

    let list = call(&mut relay, json!(1), "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["weather", "ask", "loop"],
        "the tool with an invalid x-mcp-header is dropped"
    );
    relay
        .wait_stderr("dropped a tool whose x-mcp-header annotation is invalid")
        .await;

    let weather = call(
        &mut relay,
        json!(2),
        "tools/call",
        json!({"name": "weather", "arguments": {"region": "Zürich", "days": 3.0}}),
    )
    .await;
    let text = weather["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text, "weather region==?base64?WsO8cmljaA==?= days=3",
        "{weather}"
    );
    let sent = upstream.posts_of("tools/call").pop().unwrap().json();
    let meta = &sent["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], MODERN);
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "test-host"
    );
    // roots.listChanged is a legacy-only detail; nothing the host lacks is declared.
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"sampling":{},"elicitation":{},"roots":{}})
    );
    assert!(
        upstream.posts_of("ping").is_empty(),
        "ping is answered by the relay"
    );
    // logging/setLevel is kept and sent as the envelope's logLevel from then on.
    let set = call(
        &mut relay,
        json!(3),
        "logging/setLevel",
        json!({"level": "notice"}),
    )
    .await;
    assert_eq!(set["result"], json!({}));
    call(&mut relay, json!(4), "tools/list", json!({})).await;
    let listed = upstream.posts_of("tools/list").pop().unwrap().json();
    assert_eq!(
        listed["params"]["_meta"]["io.modelcontextprotocol/logLevel"],
        "notice"
    );
    assert!(upstream.posts_of("logging/setLevel").is_empty());
    assert!(
        upstream.seen().iter().all(|s| s.method == Method::POST),
        "no GET or DELETE to a modern server"
    );
}

#[tokio::test]
async fn an_input_required_result_becomes_a_real_elicitation_and_a_retry() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"ask","arguments":{}}}))
        .await;
    let question = next_non_notification(&mut relay).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Who are you?");
    relay
        .send(json!({"jsonrpc":"2.0","id":question["id"],"result":{"action":"accept","content":{"name":"Ada"}}}))
        .await;
    let answer = next_non_notification(&mut relay).await;
    assert_eq!(answer["id"], "c", "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        r#"answer={"action":"accept","content":{"name":"Ada"}} state="state-é-1""#
    );
    let calls = upstream.posts_of("tools/call");
    assert_eq!(calls.len(), 2);
    assert_ne!(
        calls[0].json()["id"],
        calls[1].json()["id"],
        "the retry has a new id"
    );
    assert!(
        calls[1].body.contains(r#""requestState":"state-\u00e9-1""#)
            || calls[1].body.contains(r#""requestState":"state-é-1""#)
    );
    assert!(calls[0].json()["params"].get("inputResponses").is_none());
}

#[tokio::test]
async fn a_refused_elicitation_ends_the_call_with_a_tool_error() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"ask","arguments":{}}}))
        .await;
    let question = next_non_notification(&mut relay).await;
    relay
        .send(json!({"jsonrpc":"2.0","id":question["id"],"error":{"code":-1,"message":"user said no"}}))
        .await;
    let answer = next_non_notification(&mut relay).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("user said no")
    );
    assert_eq!(
        upstream.posts_of("tools/call").len(),
        1,
        "no retry after a refusal"
    );
}

#[tokio::test]
async fn the_round_cap_ends_a_call_that_never_completes() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &["--max-input-rounds", "2"]).await;
    relay.initialize().await;
    let answer = call(
        &mut relay,
        json!(5),
        "tools/call",
        json!({"name": "loop", "arguments": {}}),
    )
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("--max-input-rounds")
    );
    assert_eq!(
        upstream.posts_of("tools/call").len(),
        3,
        "the first call and two retries"
    );
}

#[tokio::test]
async fn list_changes_reach_a_legacy_host_through_subscriptions_listen() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let note = relay.recv().await;
    assert_eq!(
        note,
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
        "the subscription tag is removed"
    );
    let listen = upstream
        .posts_of("subscriptions/listen")
        .pop()
        .unwrap()
        .json();
    assert_eq!(
        listen["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    // resources/subscribe re-listens with the URI in the filter.
    let ok = call(
        &mut relay,
        json!(9),
        "resources/subscribe",
        json!({"uri": "file:///a"}),
    )
    .await;
    assert_eq!(ok["result"], json!({}));
    let seen = upstream
        .wait_until("a listen with the resource", |seen| {
            seen.iter().any(|s| {
                s.json()["params"]["notifications"]["resourceSubscriptions"] == json!(["file:///a"])
            })
        })
        .await;
    assert!(seen.len() >= 3);
}

#[tokio::test]
async fn a_modern_host_passes_through_to_a_modern_server_with_headers() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let line = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name":"weather","arguments":{"region":" padded ","days":7},"_meta":envelope(json!({}))}})
    .to_string();
    relay.send_raw(&line).await;
    let answer = relay.recv().await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "weather region==?base64?IHBhZGRlZCA=?= days=7",
        "{answer}"
    );
    let sent = upstream.posts_of("tools/call").pop().unwrap();
    assert_eq!(sent.body, line, "the host's bytes go through unchanged");
    assert!(upstream.posts_of("initialize").is_empty());
    assert_eq!(
        upstream.posts_of("tools/list").len(),
        1,
        "the relay listed the tools for their headers"
    );
    // A result without resultType reaches a modern host with it (missing means complete).
    let bare = relay
        .call(
            json!("b"),
            "tools/call",
            json!({"name": "bare", "_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(
        bare["result"],
        json!({"content": [], "resultType": "complete"})
    );
    let retired = relay
        .call(
            json!("r"),
            "tools/call",
            json!({"name": "retired", "_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(retired["error"]["code"], -32602, "{retired}");
    // An unusable envelope is refused locally with the modern codes.
    let bad = relay
        .call(json!(2), "tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}))
        .await;
    assert_eq!(bad["error"]["code"], -32022, "{bad}");
    assert_eq!(bad["error"]["data"]["supported"], json!([MODERN]));
    let missing = relay
        .call(
            json!(3),
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
        )
        .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
}

#[tokio::test]
async fn cancelling_a_modern_call_closes_its_stream() {
    let upstream = Upstream::start(|seen: &Seen| {
        if seen.rpc_method().as_deref() == Some("tools/call") {
            return Reply::Sse {
                headers: vec![],
                steps: vec![Step::Hang],
            };
        }
        modern_server(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"ask","_meta":envelope(json!({}))}}))
        .await;
    upstream.wait_for_method("tools/call").await;
    relay
        .send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}))
        .await;
    upstream.wait_dropped(1).await;
    // The channel is alive, and the next thing on it is the next answer, not the cancelled one.
    let alive = relay
        .call(
            json!("alive"),
            "server/discover",
            json!({"_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(alive["result"]["supportedVersions"], json!([MODERN]));
    assert!(
        upstream.posts_of("notifications/cancelled").is_empty(),
        "no cancel POST to a modern server"
    );
}

/// A legacy server (the relay core's fake) in front of which a modern host needs translation.
fn legacy_server(seen: &Seen) -> Reply {
    basic(seen)
}

#[tokio::test]
async fn a_modern_host_gets_discover_and_decorated_results_from_a_legacy_server() {
    let upstream = Upstream::start(|seen: &Seen| {
        if seen.rpc_method().as_deref() == Some("tools/list") {
            let request = seen.json();
            return json_reply(result_for(&request, json!({"tools": []})));
        }
        if seen.rpc_method().as_deref() == Some("resources/read") {
            let request = seen.json();
            return Reply::Json { status: 200, body: json!({"jsonrpc":"2.0","id":request["id"],"error":{"code":-32002,"message":"Resource not found"}}).to_string(), headers: vec![] };
        }
        legacy_server(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let discover = relay
        .call(
            json!("d"),
            "server/discover",
            json!({"_meta": envelope(json!({"sampling": {}}))}),
        )
        .await;
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!([MODERN]),
        "{discover}"
    );
    assert_eq!(discover["result"]["resultType"], "complete");
    assert_eq!(
        discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "fake"
    );
    let init = upstream
        .posts_of("initialize")
        .pop()
        .expect("the relay ran initialize")
        .json();
    assert_eq!(
        init["params"]["capabilities"],
        json!({"sampling": {}}),
        "the host's declared capabilities"
    );
    assert_eq!(init["params"]["clientInfo"]["name"], "modern-host");

    let list = relay
        .call(
            json!(1),
            "tools/list",
            json!({"_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(
        list["result"],
        json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
    );
    let sent = upstream.posts_of("tools/list").pop().unwrap();
    assert!(
        !sent.body.contains("io.modelcontextprotocol"),
        "envelope stripped: {}",
        sent.body
    );
    assert_eq!(sent.header("mcp-session-id").as_deref(), Some("session-1"));
    assert_ne!(
        sent.json()["id"],
        json!(1),
        "legacy ids are the relay's own"
    );

    let read = relay
        .call(
            json!(2),
            "resources/read",
            json!({"uri": "x:/y", "_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(
        read["error"]["code"], -32602,
        "-32002 is retired in 2026-07-28: {read}"
    );

    let ping = relay
        .call(json!(3), "ping", json!({"_meta": envelope(json!({}))}))
        .await;
    assert_eq!(ping["error"]["code"], -32601);
}

#[tokio::test]
async fn a_handshake_refused_with_32022_is_neither_a_session_nor_a_sign_of_http_sse() {
    // A legacy host forced onto the handshake era in front of a 2026-07-28-only server:
    // its initialize gets the server's -32022, the relay does not go looking for an
    // HTTP+SSE stream (the error proves Streamable HTTP) and sets up no session.
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &["--protocol-era", "legacy"]).await;
    let refused = relay
        .call(json!(0), "initialize", host_initialize_params())
        .await;
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    relay
        .wait_stderr("transport chosen: the POST got HTTP 400 Bad Request with a 2026-07-28 -32022")
        .await;
    assert!(
        upstream.seen().iter().all(|s| s.method == Method::POST),
        "no GET for an HTTP+SSE stream"
    );
    assert!(!relay.stderr().contains("upstream session established"));
}

#[tokio::test]
async fn the_probe_is_one_discover_and_inconclusive_outcomes_decide_nothing() {
    // A 500 to the probe is not era evidence: the host's initialize goes through as is,
    // and the next request probes again.
    let upstream = Upstream::start(|seen: &Seen| {
        if seen.rpc_method().as_deref() == Some("server/discover") {
            return Reply::Status(500);
        }
        basic(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let init = relay.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "fake", "{init}");
    relay.call(json!(1), "tools/list", json!({})).await;
    assert_eq!(
        upstream.posts_of("server/discover").len(),
        2,
        "probed again after an inconclusive probe"
    );
    relay.wait_stderr("the era probe was inconclusive").await;

    // A legacy verdict is cached: one probe for the life of the process.
    let legacy = Upstream::start(basic).await;
    let mut relay = Relay::start(&legacy.url, &[]).await;
    relay.initialize().await;
    relay.call(json!(1), "tools/list", json!({})).await;
    relay.call(json!(2), "tools/list", json!({})).await;
    assert_eq!(legacy.posts_of("server/discover").len(), 1);
    let probe = &legacy.posts_of("server/discover")[0];
    assert_eq!(
        probe.header("mcp-method").as_deref(),
        Some("server/discover")
    );
    assert_eq!(
        probe.header("mcp-protocol-version").as_deref(),
        Some(MODERN)
    );
    // After the fallback the traffic is byte-for-byte legacy.
    let list = legacy.posts_of("tools/list").pop().unwrap();
    assert!(list.header("mcp-method").is_none());
    assert!(!list.body.contains("io.modelcontextprotocol"));

    // --protocol-era legacy never probes.
    let quiet = Upstream::start(basic).await;
    let mut relay = Relay::start(&quiet.url, &["--protocol-era", "legacy"]).await;
    relay.initialize().await;
    assert!(quiet.posts_of("server/discover").is_empty());
}

static ANSWERED: std::sync::LazyLock<std::sync::Arc<tokio::sync::Notify>> =
    std::sync::LazyLock::new(Default::default);

/// A legacy server whose `deploy` tool asks the host a question mid-call (an elicitation
/// on the call's stream) and finishes once the answer has been POSTed back.
fn asking_legacy_server(seen: &Seen) -> Reply {
    let request = seen.json();
    if request.get("method").is_none() && request.get("id").is_some() {
        ANSWERED.notify_one();
        return Reply::Status(202);
    }
    if seen.rpc_method().as_deref() == Some("tools/call") {
        return Reply::Sse {
            headers: vec![],
            steps: vec![
                data(
                    json!({"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create",
                    "params":{"message":"Deploy to prod?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}),
                ),
                Step::Wait(ANSWERED.clone()),
                data(result_for(
                    &request,
                    json!({"content":[{"type":"text","text":"deployed"}]}),
                )),
            ],
        };
    }
    basic(seen)
}

#[tokio::test]
async fn a_legacy_servers_question_reaches_a_modern_host_as_input_required() {
    let upstream = Upstream::start(asking_legacy_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let caps = json!({"elicitation": {}});
    let first = relay
        .call(
            json!(1),
            "tools/call",
            json!({"name": "deploy", "arguments": {}, "_meta": envelope(caps.clone())}),
        )
        .await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["elicitation"]["method"],
        "elicitation/create"
    );
    assert_eq!(
        result["inputRequests"]["elicitation"]["params"]["message"],
        "Deploy to prod?"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();

    // A tampered state resumes nothing.
    let forged = relay
        .call(json!(2), "tools/call", json!({"name": "deploy", "arguments": {}, "_meta": envelope(caps.clone()),
            "inputResponses": {"elicitation": {"action": "accept"}}, "requestState": format!("{state}x")}))
        .await;
    assert_eq!(forged["error"]["code"], -32602, "{forged}");

    // A retry that does not answer is asked again, under the same state.
    let again = relay
        .call(
            json!(4),
            "tools/call",
            json!({"name": "deploy", "arguments": {}, "_meta": envelope(caps.clone()),
            "requestState": state}),
        )
        .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(again["result"]["requestState"], json!(state));

    let retry = relay
        .call(json!(3), "tools/call", json!({"name": "deploy", "arguments": {}, "_meta": envelope(caps),
            "inputResponses": {"elicitation": {"action": "accept", "content": {"ok": true}}}, "requestState": state}))
        .await;
    assert_eq!(retry["result"]["content"][0]["text"], "deployed", "{retry}");
    assert_eq!(retry["result"]["resultType"], "complete");
    let answer = upstream
        .seen()
        .into_iter()
        .map(|s| s.json())
        .find(|m| m["id"] == "srv-1" && m.get("result").is_some())
        .expect("the host's answer reached the server's request");
    assert_eq!(
        answer["result"],
        json!({"action": "accept", "content": {"ok": true}})
    );
    assert_eq!(
        upstream.posts_of("tools/call").len(),
        1,
        "the server's call was resumed, not repeated"
    );
}

#[tokio::test]
async fn a_question_the_modern_host_cannot_answer_is_refused_upstream() {
    let upstream = Upstream::start(asking_legacy_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    // No elicitation capability: the relay answers the server's request with an error
    // and the call goes on to whatever the server makes of that.
    let answer = relay
        .call(
            json!(1),
            "tools/call",
            json!({"name": "deploy", "arguments": {}, "_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "deployed",
        "{answer}"
    );
    let refusal = upstream
        .seen()
        .into_iter()
        .map(|s| s.json())
        .find(|m| m["id"] == "srv-1")
        .expect("the server's request was answered");
    assert_eq!(refusal["error"]["code"], -32601);
}

static REDEPLOYED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[tokio::test]
async fn a_verdict_that_proves_wrong_is_probed_again() {
    // A legacy server that is redeployed as a 2026-07-28 one while the relay runs.
    let upstream = Upstream::start(|seen: &Seen| {
        if REDEPLOYED.load(std::sync::atomic::Ordering::SeqCst) {
            modern_server(seen)
        } else {
            basic(seen)
        }
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    REDEPLOYED.store(true, std::sync::atomic::Ordering::SeqCst);
    let refused = relay.call(json!(1), "tools/list", json!({})).await;
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    relay.wait_stderr("probing again on the next request").await;
    let list = call(&mut relay, json!(2), "tools/list", json!({})).await;
    assert!(list["result"]["tools"].as_array().is_some(), "{list}");
    assert_eq!(upstream.posts_of("server/discover").len(), 2);
    // The host's initialize, answered by the legacy server, still shapes the envelope.
    let sent = upstream.posts_of("tools/list").pop().unwrap().json();
    assert_eq!(
        sent["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
        "test-host"
    );
}

static LISTENS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static DROP_NOW: std::sync::LazyLock<std::sync::Arc<tokio::sync::Notify>> =
    std::sync::LazyLock::new(Default::default);

#[tokio::test]
async fn a_dropped_listen_stream_is_reopened_and_a_graceful_end_is_not() {
    // First listen: acknowledged, then the connection breaks (no result): the relay
    // listens again and tells the host to refetch, since changes may have been missed.
    // Second listen: acknowledged, then ended with its result: the relay stays quiet.
    let upstream = Upstream::start(|seen: &Seen| {
        if seen.rpc_method().as_deref() != Some("subscriptions/listen") {
            return modern_server(seen);
        }
        let request = seen.json();
        let sub = request["id"].clone();
        let ack = data(json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged",
            "params":{"_meta":{"io.modelcontextprotocol/subscriptionId":sub},"notifications":{"toolsListChanged":true}}}));
        match LISTENS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Reply::Sse {
                headers: vec![],
                steps: vec![ack, Step::Wait(DROP_NOW.clone()), Step::Abort],
            },
            _ => Reply::Sse {
                headers: vec![],
                steps: vec![
                    ack,
                    data(json!({"jsonrpc":"2.0","id":sub,"result":{"resultType":"complete",
                        "_meta":{"io.modelcontextprotocol/subscriptionId":sub}}})),
                ],
            },
        }
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay.wait_stderr("listen stream acknowledged").await;
    DROP_NOW.notify_one();
    let resync = relay.recv().await;
    assert_eq!(
        resync["method"], "notifications/tools/list_changed",
        "{resync}"
    );
    // The channel is alive and nothing else came (no third listen after the graceful end).
    let before = relay.ping_through("alive").await;
    assert!(before.is_empty(), "{before:?}");
    relay
        .wait_stderr("the server ended the listen stream")
        .await;
    assert_eq!(upstream.posts_of("subscriptions/listen").len(), 2);
}

#[tokio::test]
async fn several_questions_in_one_round_are_asked_together() {
    let upstream = Upstream::start(|seen: &Seen| {
        let request = seen.json();
        if seen.rpc_method().as_deref() == Some("tools/call") {
            return match request["params"].get("inputResponses") {
                None => json_reply(result_for(&request, json!({
                    "resultType": "input_required",
                    "inputRequests": {
                        "llm": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
                        "where": {"method": "roots/list"}
                    }}))),
                Some(responses) => json_reply(result_for(&request, json!({
                    "resultType": "complete",
                    "content": [{"type": "text", "text": responses.to_string()}]}))),
            };
        }
        modern_server(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"x","arguments":{}}}))
        .await;
    let mut asked = vec![];
    while asked.len() < 2 {
        let message = next_non_notification(&mut relay).await;
        asked.push(message);
    }
    for question in &asked {
        let result = match question["method"].as_str().unwrap() {
            "sampling/createMessage" => {
                json!({"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"})
            }
            "roots/list" => json!({"roots":[{"uri":"file:///r"}]}),
            other => panic!("unexpected question {other}"),
        };
        relay
            .send(json!({"jsonrpc":"2.0","id":question["id"],"result":result}))
            .await;
    }
    let answer = next_non_notification(&mut relay).await;
    let text: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["llm"]["model"], "m", "{answer}");
    assert_eq!(text["where"]["roots"][0]["uri"], "file:///r");
}

#[tokio::test]
async fn a_modern_host_gets_only_the_logs_it_asked_for_and_its_cancel_reaches_the_legacy_server() {
    let upstream = Upstream::start(|seen: &Seen| {
        let request = seen.json();
        match seen.rpc_method().as_deref() {
            Some("initialize") => Reply::Json {
                status: 200,
                body: result_for(&request, json!({"protocolVersion":"2025-11-25","capabilities":{"logging":{},"tools":{}},"serverInfo":{"name":"fake","version":"1"}})).to_string(),
                headers: vec![("mcp-session-id", "session-1".into())],
            },
            Some("tools/call") if request["params"]["name"] == "chatty" => Reply::Sse {
                headers: vec![],
                steps: vec![
                    data(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"noise"}})),
                    data(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":"careful"}})),
                    data(result_for(&request, json!({"content":[]}))),
                ],
            },
            Some("tools/call") => Reply::Sse { headers: vec![], steps: vec![Step::Hang] },
            _ => basic(seen),
        }
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let mut meta = envelope(json!({}));
    meta["io.modelcontextprotocol/logLevel"] = json!("info");
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chatty","_meta":meta}}))
        .await;
    let log = relay.recv().await;
    assert_eq!(
        log["params"]["data"], "careful",
        "the debug line is below the asked level: {log}"
    );
    let answer = relay.recv().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        upstream.posts_of("logging/setLevel")[0].json()["params"]["level"],
        "info"
    );
    // Without logLevel, no log lines at all.
    relay
        .send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"chatty","_meta":envelope(json!({}))}}))
        .await;
    let answer = relay.recv().await;
    assert_eq!(
        answer["id"], 2,
        "no notifications/message for a request without logLevel: {answer}"
    );

    relay
        .send(json!({"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"hang","_meta":envelope(json!({}))}}))
        .await;
    let seen = upstream
        .wait_until("the slow call", |seen| {
            seen.iter().any(|s| s.json()["params"]["name"] == "hang")
        })
        .await;
    let upstream_id = seen
        .iter()
        .map(Seen::json)
        .find(|m| m["params"]["name"] == "hang")
        .unwrap()["id"]
        .clone();
    relay
        .send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}))
        .await;
    let cancels = upstream.wait_for_method("notifications/cancelled").await;
    let cancel = cancels
        .iter()
        .map(Seen::json)
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap();
    assert_eq!(
        cancel["params"]["requestId"], upstream_id,
        "the cancel names the id the relay used upstream"
    );
    let alive = relay
        .call(
            json!("alive"),
            "server/discover",
            json!({"_meta": envelope(json!({}))}),
        )
        .await;
    assert!(
        alive.get("result").is_some(),
        "nothing for the cancelled call came first: {alive}"
    );
}

static LISTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[tokio::test]
async fn a_header_mismatch_relists_the_tools_and_retries_once() {
    // The first tools/list predates the x-mcp-header annotation; the server now requires
    // Mcp-Param-Region and says -32020 without it.
    let upstream = Upstream::start(|seen: &Seen| {
        let request = seen.json();
        match seen.rpc_method().as_deref() {
            Some("tools/list") => {
                let annotated = LISTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0;
                let mut region = json!({"type": "string"});
                if annotated {
                    region["x-mcp-header"] = json!("Region");
                }
                json_reply(result_for(&request, json!({"resultType":"complete","ttlMs":0,"cacheScope":"private",
                    "tools":[{"name":"weather","inputSchema":{"type":"object","properties":{"region":region}}}]})))
            }
            Some("tools/call") if seen.header("mcp-param-region").is_none() => {
                error_reply(400, &request["id"], -32020, "Header mismatch: Mcp-Param-Region is missing")
            }
            _ => modern_server(seen),
        }
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay
        .call(
            json!(1),
            "tools/list",
            json!({"_meta": envelope(json!({}))}),
        )
        .await;
    let answer = relay
        .call(
            json!(2),
            "tools/call",
            json!({"name": "weather", "arguments": {"region": "eu"}, "_meta": envelope(json!({}))}),
        )
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "weather region=eu days=",
        "{answer}"
    );
    assert_eq!(
        upstream.posts_of("tools/list").len(),
        2,
        "listed again once"
    );
    assert_eq!(upstream.posts_of("tools/call").len(), 2, "retried once");
}

#[tokio::test]
async fn a_modern_hosts_listen_is_a_long_lived_stream_it_can_close() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay
        .send(
            json!({"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{
            "_meta": envelope(json!({})), "notifications": {"toolsListChanged": true}}}),
        )
        .await;
    let ack = relay.recv().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
    let change = relay.recv().await;
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L",
        "a modern host keeps the tag"
    );
    let listen = upstream.posts_of("subscriptions/listen").pop().unwrap();
    assert_eq!(
        listen.header("mcp-method").as_deref(),
        Some("subscriptions/listen")
    );
    relay
        .send(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}),
        )
        .await;
    upstream.wait_dropped(1).await;
    let alive = relay
        .call(
            json!("alive"),
            "server/discover",
            json!({"_meta": envelope(json!({}))}),
        )
        .await;
    assert!(alive.get("result").is_some(), "{alive}");
}

#[tokio::test]
async fn a_modern_hosts_task_requests_are_routed_by_task_with_mcp_name() {
    let upstream = Upstream::start(modern_server).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let meta = envelope(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
    let got = relay
        .call(
            json!(1),
            "tasks/get",
            json!({"taskId": "task-42", "_meta": meta}),
        )
        .await;
    assert_eq!(got["result"]["taskId"], "task-42", "{got}");
    let sent = upstream.posts_of("tasks/get").pop().unwrap();
    assert_eq!(sent.header("mcp-name").as_deref(), Some("task-42"));
}

#[tokio::test]
async fn a_legacy_servers_tasks_are_hidden_from_a_modern_host_as_serve_hides_them() {
    let upstream = Upstream::start(|seen: &Seen| {
        let request = seen.json();
        if request["method"] == "tools/call" {
            // A 2025-11-25 task server: a `task` parameter gets a nested task back.
            let result = match request["params"].get("task") {
                Some(_) => json!({"task": {"taskId": "legacy-1", "status": "working", "ttl": null,
                                           "createdAt": "x", "lastUpdatedAt": "x"}}),
                None => json!({"content": [{"type": "text", "text": "plain"}]}),
            };
            return json_reply(result_for(&request, result));
        }
        legacy_server(seen)
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let opted = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let called = relay
        .call(
            json!(1),
            "tools/call",
            json!({"name": "echo", "task": {"ttl": 1000}, "_meta": envelope(opted.clone())}),
        )
        .await;
    assert_eq!(called["result"]["content"][0]["text"], "plain", "{called}");
    let codes = [
        ("tasks/get", json!({}), -32021),
        ("tasks/get", opted.clone(), -32602),
        ("tasks/cancel", opted.clone(), -32602),
        ("tasks/list", opted.clone(), -32601),
    ];
    for (n, (method, capabilities, code)) in codes.into_iter().enumerate() {
        let answer = relay
            .call(
                json!(10 + n),
                method,
                json!({"taskId": "legacy-1", "_meta": envelope(capabilities)}),
            )
            .await;
        assert_eq!(answer["error"]["code"], code, "{method}: {answer}");
    }
    assert!(
        upstream.posts_of("tasks/get").is_empty(),
        "never asked upstream"
    );
}
