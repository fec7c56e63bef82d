//! `serve --config FILE --aggregate` with a remote server that speaks 2026-07-28 only: its
//! relay detects the era and translates, so a handshake-era client of the aggregate lists
//! and calls its tools (with their `Mcp-Param-*` headers) and answers its input rounds as
//! elicitation requests; a 2026-07-28 client does the same as input rounds of its own. And
//! a server that failed is tried again only after `--aggregate-retry-after`.

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

use crate::common::Upstream;
use crate::common::modern::CLIENT_CAPABILITIES;
use crate::common::serve::*;

async fn aggregate_with_modern_remote() -> (tempfile::TempDir, Upstream, Serve) {
    let upstream = Upstream::start(crate::relay_eras::modern_server).await;
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[servers.alpha]\ncommand = {:?}\n[servers.far]\ntype = \"http\"\nurl = {:?}\n",
        fixture(),
        upstream.url
    );
    let file = dir.path().join("serve.toml");
    std::fs::write(&file, text).unwrap();
    let serve = Serve::start_config(&file, &["--aggregate"], &[]).await;
    (dir, upstream, serve)
}

async fn post_at(serve: &Serve, session: &str, message: &Value) -> Answer {
    serve
        .send(
            "POST",
            "/mcp",
            &[("mcp-session-id", session)],
            &message.to_string(),
        )
        .await
}

fn last_message(answer: &Answer) -> Value {
    if answer.body.starts_with('{') {
        answer.json()
    } else {
        answer.events().pop().expect("an answer")
    }
}

#[tokio::test]
async fn a_handshake_client_uses_a_2026_remote_server_through_the_aggregate() {
    let (_dir, upstream, serve) = aggregate_with_modern_remote().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"}}});
    let init = serve
        .send("POST", "/mcp", &[], &initialize.to_string())
        .await;
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.session();
    let listed = last_message(
        &post_at(
            &serve,
            &session,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
        )
        .await,
    );
    let tools = listed["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"far__weather") && names.contains(&"alpha__echo"),
        "{names:?}"
    );

    let weather = last_message(
        &post_at(
            &serve,
            &session,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "far__weather", "arguments": {"region": "north", "days": 3}}}),
        )
        .await,
    );
    assert_eq!(
        weather["result"]["content"][0]["text"], "weather region=north days=3",
        "the relay sent the 2026-07-28 headers: {weather}"
    );
    assert!(
        upstream.posts_of("initialize").is_empty(),
        "the server was spoken to in its own era"
    );

    // The server's input round reaches the client as an elicitation request.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "far__ask", "arguments": {}}});
    let request = http::Request::builder()
        .method("POST")
        .uri(serve.url.replace("/alpha/mcp", "/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .body(Full::new(Bytes::from(call.to_string())))
        .unwrap();
    let mut body = serve.http.request(request).await.unwrap().into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s: &str| {
        s.contains("elicitation/create")
    })
    .await;
    let question: Value = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|m: &Value| m["method"] == "elicitation/create")
        .unwrap();
    assert_eq!(question["params"]["message"], "Who are you?");
    let reply = post_at(
        &serve,
        &session,
        &json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}),
    )
    .await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    read_until(&mut body, &mut seen, |s: &str| s.contains("answer=")).await;
    assert!(seen.contains("Ada"), "{seen}");
}

#[tokio::test]
async fn a_2026_client_uses_a_2026_remote_server_through_the_aggregate() {
    let (_dir, _upstream, serve) = aggregate_with_modern_remote().await;
    let first = serve
        .modern(
            json!(1),
            "tools/call",
            json!({"name": "far__ask", "arguments": {},
                "_meta": {CLIENT_CAPABILITIES: {"elicitation": {}}}}),
            Some("far__ask"),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let round = last_message(&first);
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let (key, asked) = round["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(asked["method"], "elicitation/create", "{round}");
    let retry = json!({"name": "far__ask", "arguments": {},
        "_meta": {CLIENT_CAPABILITIES: {"elicitation": {}}},
        "inputResponses": {key: {"action": "accept", "content": {"name": "Grace"}}},
        "requestState": round["result"]["requestState"]});
    let done = serve
        .modern(json!(2), "tools/call", retry, Some("far__ask"))
        .await;
    let done = last_message(&done);
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Grace"), "{done}");
}

/// A server that fails to start until `flag` exists, then is the fixture.
fn late_entry(flag: &std::path::Path) -> String {
    format!(
        "[servers.late]\ncommand = \"sh\"\nargs = [\"-c\", \"test -e {} && exec {}\"]\n",
        flag.display(),
        fixture()
    )
}

async fn tool_names(serve: &Serve, session: &str, id: u64) -> Vec<String> {
    let listed = last_message(
        &post_at(
            serve,
            session,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}}),
        )
        .await,
    );
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_failed_server_is_tried_again_after_aggregate_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("ready");
    let text = format!(
        "[servers.alpha]\ncommand = {:?}\n{}",
        fixture(),
        late_entry(&flag)
    );
    let file = dir.path().join("serve.toml");
    std::fs::write(&file, text).unwrap();
    let flags = |retry| ["--aggregate", "--aggregate-retry-after", retry];
    let patient = Serve::start_config(&file, &flags("3600"), &[]).await;
    let eager = Serve::start_config(&file, &flags("0"), &[]).await;
    let mut sessions = Vec::new();
    for serve in [&patient, &eager] {
        let session = serve.initialize().await;
        let names = tool_names(serve, &session, 1).await;
        assert!(
            names.contains(&"alpha__echo".to_owned())
                && !names.iter().any(|n| n.starts_with("late__")),
            "{names:?}"
        );
        sessions.push(session);
    }
    std::fs::write(&flag, "").unwrap();
    // 0: the next list tries it again, and it answers.
    let back = crate::common::eventually("late to be listed", async || {
        let names = tool_names(&eager, &sessions[1], 2).await;
        if names.contains(&"late__echo".to_owned()) {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    assert!(back.contains(&"alpha__echo".to_owned()));
    // An hour: still left out, its calls told why (the list itself proves it answers).
    let names = tool_names(&patient, &sessions[0], 2).await;
    assert!(names.contains(&"alpha__echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("late__")), "{names:?}");
    let ready = patient.send("GET", "/readyz", &[], "").await;
    assert!(ready.body.contains("server late: down"), "{}", ready.body);
}

fn hang_up(serve: &Serve) {
    let pid = serve.child.id().unwrap() as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
}

async fn tools_at(serve: &Serve, path: &str, session: &str) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}});
    let answer = serve
        .send(
            "POST",
            path,
            &[("mcp-session-id", session)],
            &list.to_string(),
        )
        .await;
    let message = last_message(&answer);
    message["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{path}: {message}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn sighup_follows_the_file_in_the_aggregate_endpoints_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    let entry = |name: &str, extra: &str| {
        format!(
            "[servers.{name}]\ncommand = {:?}\nspare_children = 0\n{extra}\n",
            fixture()
        )
    };
    let team = "[aggregates.team]\npath = \"/team/mcp\"\nservers = [\"alpha\"]\n";
    std::fs::write(&file, format!("{}{team}", entry("alpha", ""))).unwrap();
    let serve = Serve::start_config(&file, &["--aggregate", "--reload-grace", "60"], &[]).await;
    let open_at = async |path: &str| {
        let init = serve.send("POST", path, &[], &initialize_body()).await;
        assert_eq!(init.status, 200, "{path}: {}", init.body);
        init.session()
    };
    let before = open_at("/mcp").await;
    let team_session = open_at("/team/mcp").await;
    assert!(
        tools_at(&serve, "/mcp", &before)
            .await
            .contains(&"alpha__echo".to_owned())
    );
    assert!(
        !tools_at(&serve, "/team/mcp", &team_session)
            .await
            .contains(&"alpha__late".to_owned())
    );

    // beta is added (the --aggregate endpoint, every server, is replaced) and alpha
    // changes (the team endpoint, the same spec, reads alpha's lists again).
    std::fs::write(
        &file,
        format!(
            "{}{}{team}",
            entry("alpha", "env = { FIXTURE_EXTRA_TOOL = \"late\" }"),
            entry("beta", "")
        ),
    )
    .unwrap();
    hang_up(&serve);
    serve.wait_stderr("SIGHUP: reloaded").await;

    let after = open_at("/mcp").await;
    let listed = tools_at(&serve, "/mcp", &after).await;
    assert!(
        listed.contains(&"beta__echo".to_owned()) && listed.contains(&"alpha__late".to_owned()),
        "{listed:?}"
    );
    // The session from before goes on at the endpoint that holds it, until it ends.
    let old = tools_at(&serve, "/mcp", &before).await;
    assert!(
        old.contains(&"alpha__echo".to_owned()) && !old.contains(&"beta__echo".to_owned()),
        "{old:?} {}",
        serve.stderr()
    );
    // The kept endpoint's own session sees alpha's new generation.
    let team_tools = tools_at(&serve, "/team/mcp", &team_session).await;
    assert!(
        team_tools.contains(&"alpha__late".to_owned()),
        "{team_tools:?}"
    );
    let ready = serve.send("GET", "/readyz", &[], "").await;
    assert!(
        ready.body.contains("aggregate aggregate server beta"),
        "{}",
        ready.body
    );

    // An aggregate naming a server the file no longer has: the reload is refused whole.
    std::fs::write(
        &file,
        format!(
            "{}[aggregates.team]\npath = \"/team/mcp\"\nservers = [\"gone\"]\n",
            entry("alpha", "")
        ),
    )
    .unwrap();
    hang_up(&serve);
    serve
        .wait_stderr("SIGHUP: not reloaded, every server goes on as it was")
        .await;
    let still = tools_at(&serve, "/mcp", &open_at("/mcp").await).await;
    assert!(still.contains(&"beta__echo".to_owned()), "{still:?}");
}
