//! `serve --config FILE --aggregate`: the file's servers behind one endpoint. Names
//! SERVER__NAME with every page of every server's list behind the gateway's own cursor,
//! URIs SERVER+URI both ways, a server's question answered by the client in both eras,
//! cancellation reaching the server that runs the call, collisions and bad names refused
//! at load, a dead server left out (fail open) or the endpoint refused (fail closed).

use std::path::Path;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

use crate::common::serve::*;
use crate::common::{binary, eventually, run_to_end};

/// A fixture server with the full catalog, its tools paged `page` at a time.
fn full_entry(name: &str, page: usize, extra: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\nenv = {{ FIXTURE_CATALOG = \"full\", FIXTURE_PAGE_SIZE = \"{page}\" }}\n{extra}\n",
        fixture()
    )
}

async fn start(file: &Path, flags: &[&str]) -> Serve {
    Serve::start_config(file, flags, &[]).await
}

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let file = dir.join("serve.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// Two fixture servers with the full catalog, alpha and beta, behind `--aggregate`.
async fn alpha_and_beta() -> (tempfile::TempDir, Serve) {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}{}",
        full_entry("alpha", 100, ""),
        full_entry("beta", 100, "")
    );
    let file = write(dir.path(), &text);
    let serve = start(&file, &["--aggregate"]).await;
    (dir, serve)
}

/// Opens a streaming request at the aggregate endpoint; its body is read by the caller.
async fn open_at_aggregate(
    serve: &Serve,
    method: &str,
    session: &str,
    body: &str,
) -> hyper::body::Incoming {
    let request = http::Request::builder()
        .method(method)
        .uri(serve.url.replace("/alpha/mcp", "/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    serve.http.request(request).await.unwrap().into_body()
}

async fn rpc(serve: &Serve, session: &str, id: u64, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let answer = serve
        .send(
            "POST",
            "/mcp",
            &[("mcp-session-id", session)],
            &body.to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    if answer.body.starts_with('{') {
        answer.json()
    } else {
        answer.events().pop().expect("an answer")
    }
}

/// Every page of a list, following the gateway's cursor.
async fn every_page(serve: &Serve, session: &str, method: &str, key: &str) -> (Vec<Value>, usize) {
    let (mut items, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let answer = rpc(serve, session, 100 + pages as u64, method, params).await;
        pages += 1;
        items.extend(
            answer["result"][key]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        match answer["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (items, pages),
        }
    }
}

fn names(items: &[Value], key: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| i[key].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn names_pages_uris_prompts_and_completion_through_one_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        &format!(
            "{}{}",
            full_entry("alpha", 4, ""),
            full_entry("beta", 3, "")
        ),
    );
    let serve = start(&file, &["--aggregate", "--aggregate-page-size", "10"]).await;
    let init = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(init.status, 200, "{}", init.body);
    let result = &init.json()["result"];
    assert_eq!(
        result["serverInfo"]["name"],
        "mcp-stdio aggregate aggregate"
    );
    assert_eq!(
        result["capabilities"]["resources"]["subscribe"], true,
        "{result}"
    );
    assert!(result["capabilities"]["prompts"].is_object(), "{result}");
    let session = init.session();

    // Every tool of both servers, each once, across pages of 10 (the servers page by 4 and 3).
    let (tools, pages) = every_page(&serve, &session, "tools/list", "tools").await;
    let tools = names(&tools, "name");
    assert_eq!(tools.len(), 32, "{tools:?}");
    assert_eq!(pages, 4);
    for server in ["alpha", "beta"] {
        for tool in ["echo", "link", "region", "ask"] {
            let name = format!("{server}__{tool}");
            assert_eq!(
                tools.iter().filter(|t| **t == name).count(),
                1,
                "{name} in {tools:?}"
            );
        }
    }
    // A cursor the gateway did not give is refused with what would work.
    let foreign = rpc(
        &serve,
        &session,
        5,
        "tools/list",
        json!({"cursor": "page:4"}),
    )
    .await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert!(
        foreign["error"]["message"]
            .as_str()
            .unwrap()
            .contains("list again without a cursor")
    );

    let echo = rpc(
        &serve,
        &session,
        6,
        "tools/call",
        json!({"name": "beta__echo", "arguments": {"text": "to beta"}}),
    )
    .await;
    assert_eq!(echo["result"]["content"][0]["text"], "to beta", "{echo}");
    let unknown = rpc(
        &serve,
        &session,
        7,
        "tools/call",
        json!({"name": "gamma__echo"}),
    )
    .await;
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools/list gives the names"),
        "{unknown}"
    );

    // Resources: published as SERVER+URI, read back by that URI, and so in results.
    let (resources, _) = every_page(&serve, &session, "resources/list", "resources").await;
    assert_eq!(
        names(&resources, "uri"),
        ["alpha+fixture://note", "beta+fixture://note"]
    );
    let (templates, _) = every_page(
        &serve,
        &session,
        "resources/templates/list",
        "resourceTemplates",
    )
    .await;
    assert_eq!(
        names(&templates, "uriTemplate"),
        ["alpha+fixture://notes/{id}", "beta+fixture://notes/{id}"]
    );
    let read = rpc(
        &serve,
        &session,
        8,
        "resources/read",
        json!({"uri": "beta+fixture://note"}),
    )
    .await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "read fixture://note",
        "{read}"
    );
    assert_eq!(
        read["result"]["contents"][0]["uri"], "beta+fixture://note",
        "{read}"
    );
    let link = rpc(
        &serve,
        &session,
        9,
        "tools/call",
        json!({"name": "alpha__link"}),
    )
    .await;
    assert_eq!(
        link["result"]["content"][0]["uri"], "alpha+fixture://note",
        "{link}"
    );
    let subscribe = rpc(
        &serve,
        &session,
        10,
        "resources/subscribe",
        json!({"uri": "alpha+fixture://note"}),
    )
    .await;
    assert_eq!(subscribe["result"], json!({}), "{subscribe}");

    // Prompts and completion go where the name leads.
    let (prompts, _) = every_page(&serve, &session, "prompts/list", "prompts").await;
    assert_eq!(names(&prompts, "name"), ["alpha__greet", "beta__greet"]);
    let prompt = rpc(
        &serve,
        &session,
        11,
        "prompts/get",
        json!({"name": "beta__greet"}),
    )
    .await;
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"], "hello from greet",
        "{prompt}"
    );
    let complete = rpc(&serve, &session, 12, "completion/complete", json!({"ref": {"type": "ref/prompt", "name": "alpha__greet"}, "argument": {"name": "x", "value": ""}})).await;
    assert!(
        complete["result"]["completion"]["values"][0]
            .as_str()
            .unwrap()
            .contains("\"greet\""),
        "{complete}"
    );
    let level = rpc(
        &serve,
        &session,
        13,
        "logging/setLevel",
        json!({"level": "debug"}),
    )
    .await;
    assert_eq!(level["result"], json!({}));

    let ready = serve.send("GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200);
    assert!(
        ready.body.contains("aggregate aggregate server beta: up"),
        "{}",
        ready.body
    );
    let metrics = serve.send("GET", "/metrics", &[], "").await;
    assert!(
        metrics
            .body
            .contains("mcp_stdio_aggregate_server_up{aggregate=\"aggregate\",server=\"alpha\"} 1"),
        "{}",
        metrics.body
    );
}

#[tokio::test]
async fn a_collision_and_a_name_too_long_are_refused_naming_both_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let long = "t".repeat(70);
    let text = format!(
        "{}[servers.alpha.aliases]\necho = \"beta__echo\"\n{}",
        full_entry("alpha", 100, ""),
        full_entry("beta", 100, &format!("env.FIXTURE_EXTRA_TOOL = \"{long}\""))
            .replace("env = {", "# env = {"),
    );
    let text = text.replace(
        "# env = { FIXTURE_CATALOG = \"full\", FIXTURE_PAGE_SIZE = \"100\" }",
        "env.FIXTURE_CATALOG = \"full\"",
    );
    let file = write(dir.path(), &text);
    let serve = start(&file, &["--aggregate"]).await;
    let session = serve.initialize().await;
    let (tools, _) = every_page(&serve, &session, "tools/list", "tools").await;
    let tools = names(&tools, "name");
    assert!(
        tools.contains(&"alpha__link".to_owned()),
        "the channel is alive: {tools:?}"
    );
    assert!(
        !tools.contains(&"beta__echo".to_owned()),
        "both sides of a collision are refused: {tools:?}"
    );
    assert!(!tools.iter().any(|t| t.contains(&long)), "{tools:?}");
    serve.wait_stderr("beta__echo").await;
    let log = serve.stderr();
    assert!(
        log.contains("[servers.NAME.aliases]") || log.contains("aliases"),
        "{log}"
    );
    assert!(log.contains(&long), "the long name is named: {log}");
}

#[test]
fn bad_aggregate_configs_are_usage_errors_that_say_what_works() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture();
    let cases = [
        (
            format!("[servers.a__b]\ncommand = {fixture:?}\n"),
            vec!["--aggregate"],
            "separator",
        ),
        (
            format!("[servers.a]\ncommand = {fixture:?}\n"),
            vec!["--aggregate", "--aggregate-separator", "::"],
            "1 to 4 of '_' and '-'",
        ),
        (
            format!(
                "[servers.a]\ncommand = {fixture:?}\n[aggregates.team]\nservers = [\"nope\"]\n"
            ),
            vec![],
            "no server is named \"nope\"",
        ),
        (
            format!("[servers.a]\ncommand = {fixture:?}\n[aggregates.team]\npath = \"/a/mcp\"\n"),
            vec![],
            "where the server \"a\" is served",
        ),
        (
            format!("[servers.a]\ncommand = {fixture:?}\n[aggregates.team]\nfail = \"maybe\"\n"),
            vec![],
            "use open or closed",
        ),
        (
            format!("[servers.a]\ncommand = {fixture:?}\n[aggregates.team]\nwhat = 1\n"),
            vec![],
            "its keys are path, servers, separator, fail",
        ),
        (
            format!("[servers.a]\ncommand = {fixture:?}\n[aggregates.team]\npath = \"/metrics\"\n"),
            vec![],
            "one serve answers itself",
        ),
        (
            format!(
                "[servers.a]\ncommand = {fixture:?}\nauth = {{ mode = \"token\", token_env = \"HOME\" }}\n"
            ),
            vec!["--aggregate"],
            "checks its callers its own way",
        ),
        (
            "[servers.r]\ntype = \"http\"\nurl = \"https://x.example/mcp\"\ncommand = \"sh\"\n"
                .to_owned(),
            vec!["--aggregate"],
            "leave out command, args and cwd",
        ),
        (
            format!("[servers.a]\ncommand = {fixture:?}\nurl = \"https://x.example/mcp\"\n"),
            vec!["--aggregate"],
            "are a remote server's",
        ),
        (
            "[servers.r]\ntype = \"ws\"\nurl = \"wss://x.example/mcp\"\n".to_owned(),
            vec!["--aggregate"],
            "type \"ws\" is not served",
        ),
        (
            "[servers.r]\ntype = \"http\"\nurl = \"https://me:pw@x.example/mcp\"\n".to_owned(),
            vec!["--aggregate"],
            "give them as a header",
        ),
    ];
    for (text, flags, needle) in cases {
        let file = write(dir.path(), &text);
        let file = file.to_str().unwrap();
        let mut args = vec!["serve", "--port", "0", "--config", file];
        args.extend(flags);
        let (code, _, stderr) = run_to_end(&args);
        assert_eq!(code, 2, "{text}: {stderr}");
        assert!(stderr.contains(needle), "{text}: {needle:?} in {stderr}");
    }
    let (code, _, stderr) = run_to_end(&["serve", "--port", "0", "--aggregate", "--", &fixture]);
    assert_eq!(code, 2);
    assert!(stderr.contains("give --config FILE"), "{stderr}");
}

#[tokio::test]
async fn a_servers_question_is_answered_by_a_handshake_era_client() {
    let (_dir, serve) = alpha_and_beta().await;
    let session = serve.initialize().await;
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"beta__ask"}});
    let mut body = open_at_aggregate(&serve, "POST", &session, &call.to_string()).await;
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s: &str| {
        s.contains("elicitation/create")
    })
    .await;
    let question: Value =
        serde_json::from_str(seen.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    let id = question["id"].as_str().unwrap();
    assert!(
        id.starts_with("mcp-stdio-aggregate-1-"),
        "the question is under the gateway's id: {question}"
    );
    let reply = serve
        .post(
            Some(&session),
            json!({"jsonrpc":"2.0","id":id,"result":{"action":"accept","content":{"name":"Ada"}}}),
        )
        .await;
    assert_eq!(reply.status, 202);
    read_until(&mut body, &mut seen, |s: &str| s.contains("asked: Ada")).await;
}

#[tokio::test]
async fn a_2026_client_lists_calls_and_answers_a_question_as_an_input_required_round() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        &format!(
            "{}{}",
            full_entry("alpha", 2, ""),
            full_entry("beta", 100, "")
        ),
    );
    let serve = start(&file, &["--aggregate"]).await;
    let list = serve.modern(json!(1), "tools/list", json!({}), None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(
        list.json()["result"]["tools"].as_array().unwrap().len(),
        32,
        "{}",
        list.body
    );
    let echo = serve
        .modern(
            json!(2),
            "tools/call",
            json!({"name": "alpha__echo", "arguments": {"text": "modern"}}),
            Some("alpha__echo"),
        )
        .await;
    assert_eq!(
        echo.json()["result"]["content"][0]["text"],
        "modern",
        "{}",
        echo.body
    );

    let capabilities = json!({"elicitation": {}});
    let ask = |retry: Option<(String, Value)>| {
        let mut params = json!({"name": "beta__ask", "arguments": {},
            "_meta": {crate::common::modern::CLIENT_CAPABILITIES: capabilities.clone()}});
        if let Some((state, responses)) = retry {
            params["requestState"] = json!(state);
            params["inputResponses"] = responses;
        }
        params
    };
    let first = serve
        .modern(json!(3), "tools/call", ask(None), Some("beta__ask"))
        .await;
    let result = &first.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{}", first.body);
    let state = result["requestState"].as_str().unwrap().to_owned();
    let key = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let responses = json!({key: {"action": "accept", "content": {"name": "Grace"}}});
    let done = serve
        .modern(
            json!(4),
            "tools/call",
            ask(Some((state, responses))),
            Some("beta__ask"),
        )
        .await;
    assert_eq!(
        done.json()["result"]["content"][0]["text"],
        "asked: Grace",
        "{}",
        done.body
    );
}

#[tokio::test]
async fn a_cancellation_reaches_only_the_server_that_runs_the_call() {
    let (_dir, serve) = alpha_and_beta().await;
    let session = serve.initialize().await;
    // Both servers have a session for this client (the channel to each is alive).
    rpc(
        &serve,
        &session,
        1,
        "tools/call",
        json!({"name": "alpha__echo"}),
    )
    .await;
    rpc(
        &serve,
        &session,
        2,
        "tools/call",
        json!({"name": "beta__echo"}),
    )
    .await;
    let slow = rpc(
        &serve,
        &session,
        9,
        "tools/call",
        json!({"name": "beta__slow", "arguments": {"ms": 3000}}),
    );
    let cancel = async {
        eventually("the call is with beta", async || {
            let metrics = serve.send("GET", "/metrics", &[], "").await.body;
            metrics
                .contains("mcp_stdio_pending_requests{server=\"beta\"} 1")
                .then_some(())
                .ok_or(metrics)
        })
        .await;
        let note = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"no longer needed"}});
        let sent = serve
            .send(
                "POST",
                "/mcp",
                &[("mcp-session-id", &session)],
                &note.to_string(),
            )
            .await;
        assert_eq!(sent.status, 202);
    };
    let (_, ()) = tokio::join!(slow, cancel);
    serve.wait_stderr("fixture: cancelled 9").await;
    let log = serve.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("fixture: cancelled 9"))
        .unwrap();
    assert!(line.contains("server=beta"), "{line}");
    assert_eq!(log.matches("fixture: cancelled").count(), 1, "{log}");
}

#[tokio::test]
async fn a_dead_server_is_left_out_and_the_others_go_on_or_the_endpoint_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}[servers.gone]\ncommand = \"false\"\n",
        full_entry("alpha", 100, "")
    );
    let file = write(dir.path(), &text);
    let serve = start(&file, &["--aggregate", "--aggregate-timeout", "5"]).await;
    let session = serve.initialize().await;
    let (tools, _) = every_page(&serve, &session, "tools/list", "tools").await;
    let tools = names(&tools, "name");
    assert!(tools.contains(&"alpha__echo".to_owned()), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("gone__")), "{tools:?}");
    let ready = serve.send("GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "fail open stays ready");
    assert!(ready.body.contains("server gone: down"), "{}", ready.body);
    let metrics = serve.send("GET", "/metrics", &[], "").await;
    assert!(
        metrics.body.contains("server=\"gone\"} 0"),
        "{}",
        metrics.body
    );
    let echo = rpc(
        &serve,
        &session,
        3,
        "tools/call",
        json!({"name": "alpha__echo", "arguments": {"text": "on"}}),
    )
    .await;
    assert_eq!(echo["result"]["content"][0]["text"], "on");

    let closed = start(
        &file,
        &[
            "--aggregate",
            "--aggregate-fail",
            "closed",
            "--aggregate-timeout",
            "5",
        ],
    )
    .await;
    let init = closed.send("POST", "/mcp", &[], &initialize_body()).await;
    let message = init.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("\"gone\"") && message.contains("fails closed"),
        "{}",
        init.body
    );
    let ready = closed.send("GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 503, "{}", ready.body);
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_fails_that_call_and_is_used_again_next_time() {
    let (_dir, serve) = alpha_and_beta().await;
    let session = serve.initialize().await;
    let crash = rpc(
        &serve,
        &session,
        1,
        "tools/call",
        json!({"name": "beta__crash"}),
    )
    .await;
    let message = crash["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"beta\""),
        "the error names the server: {crash}"
    );
    let alpha = rpc(
        &serve,
        &session,
        2,
        "tools/call",
        json!({"name": "alpha__echo", "arguments": {"text": "still"}}),
    )
    .await;
    assert_eq!(alpha["result"]["content"][0]["text"], "still");
    let again = rpc(
        &serve,
        &session,
        3,
        "tools/call",
        json!({"name": "beta__echo", "arguments": {"text": "back"}}),
    )
    .await;
    assert_eq!(again["result"]["content"][0]["text"], "back", "{again}");
}

#[tokio::test]
async fn a_servers_list_change_reaches_the_clients_stream() {
    let (_dir, serve) = alpha_and_beta().await;
    let session = serve.initialize().await;
    let mut body = open_at_aggregate(&serve, "GET", &session, "").await;
    let announced = rpc(
        &serve,
        &session,
        1,
        "tools/call",
        json!({"name": "beta__announce"}),
    )
    .await;
    assert_eq!(announced["result"]["content"][0]["text"], "will announce");
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s: &str| {
        s.contains("notifications/tools/list_changed")
    })
    .await;
    // The list is read again, and still complete.
    let (tools, _) = every_page(&serve, &session, "tools/list", "tools").await;
    assert_eq!(tools.len(), 32);
}

#[tokio::test]
async fn the_aggregate_endpoint_checks_callers_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), &full_entry("alpha", 100, ""));
    let secret = "aggregate-bearer-0123456789";
    let serve = start(&file, &["--aggregate", "--auth-token", secret]).await;
    let refused = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let auth = format!("Bearer {secret}");
    let init = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &auth)],
            &initialize_body(),
        )
        .await;
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.session();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "alpha__echo", "arguments": {"text": "authorized"}}});
    let answer = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &auth), ("mcp-session-id", &session)],
            &call.to_string(),
        )
        .await;
    assert!(answer.body.contains("authorized"), "{}", answer.body);
    assert!(
        !serve.stderr().contains(secret),
        "the token never reaches the log"
    );
}

#[tokio::test]
async fn the_list_size_bound_and_the_time_limit_leave_a_server_out_with_the_flag_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}{}[servers.mute]\ncommand = \"sleep\"\nargs = [\"60\"]\n",
        full_entry("alpha", 100, ""),
        full_entry("beta", 100, "")
    );
    let file = write(dir.path(), &text);
    let serve = start(
        &file,
        &[
            "--aggregate",
            "--aggregate-max-list-items",
            "20",
            "--aggregate-timeout",
            "1",
        ],
    )
    .await;
    let session = serve.initialize().await;
    let (tools, _) = every_page(&serve, &session, "tools/list", "tools").await;
    let servers: std::collections::BTreeSet<String> = names(&tools, "name")
        .iter()
        .map(|n| n.split("__").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        tools.len(),
        16,
        "one server's 16 tools fit in 20, two do not: {servers:?}"
    );
    serve.wait_stderr("--aggregate-max-list-items").await;
    let ready = serve.send("GET", "/readyz", &[], "").await;
    assert!(
        ready.body.contains("server mute: down") && ready.body.contains("(--aggregate-timeout)"),
        "{}",
        ready.body
    );
}

/// A remote Streamable HTTP server: one tool; `expire` ends every session it has given
/// (its requests then get 404, as a restarted server answers).
fn remote_server(
    expire: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> impl Fn(&crate::common::Seen) -> crate::common::Reply + Send + Sync + 'static {
    use crate::common::{Reply, json_reply, result_for, standard};
    use std::sync::atomic::Ordering;
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    move |seen| {
        let request = if seen.method == http::Method::POST {
            seen.json()
        } else {
            Value::Null
        };
        let alive_from = expire.load(Ordering::SeqCst);
        if let Some(session) = seen.header("mcp-session-id") {
            let n: usize = session.trim_start_matches("session-").parse().unwrap_or(0);
            if n < alive_from {
                return Reply::Status(404);
            }
        }
        match request["method"].as_str() {
            Some("initialize") => {
                let n = next.fetch_add(1, Ordering::SeqCst).max(alive_from);
                next.fetch_max(n + 1, Ordering::SeqCst);
                Reply::Json {
                    status: 200,
                    body: result_for(&request, json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "far", "version": "1"}})).to_string(),
                    headers: vec![("mcp-session-id", format!("session-{n}"))],
                }
            }
            Some("tools/list") => json_reply(result_for(
                &request,
                json!({"tools": [{"name": "remote-echo", "inputSchema": {"type": "object"}}]}),
            )),
            Some("tools/call") => json_reply(result_for(
                &request,
                json!({"content": [{"type": "text", "text": format!("far: {}", request["params"]["arguments"]["text"])}]}),
            )),
            _ => standard(seen).unwrap_or_else(|| json_reply(result_for(&request, json!({})))),
        }
    }
}

#[tokio::test]
async fn a_remote_server_is_reached_through_the_relay_with_its_headers_and_an_expired_session_renewed()
 {
    let expire = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let upstream = crate::common::Upstream::start(remote_server(expire.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let secret = "team-header-secret-42";
    let text = format!(
        "{}[servers.far]\ntype = \"http\"\nurl = {:?}\nheaders = {{ X-Team = \"${{TEAM_SECRET}}\" }}\n",
        full_entry("alpha", 100, ""),
        upstream.url
    );
    let file = write(dir.path(), &text);
    let mut command = tokio::process::Command::new(binary());
    command
        .args(["serve", "--port", "0", "--log-level", "debug", "--config"])
        .arg(&file)
        .arg("--aggregate")
        .env("TEAM_SECRET", secret)
        .env_remove("MCP_STDIO_SERVE_TOKEN");
    let serve = Serve::spawn(command).await;
    let session = serve.initialize().await;
    let first = rpc(
        &serve,
        &session,
        1,
        "tools/call",
        json!({"name": "far__remote-echo", "arguments": {"text": "one"}}),
    )
    .await;
    assert_eq!(
        first["result"]["content"][0]["text"], "far: \"one\"",
        "{first}"
    );
    let calls = upstream.posts_of("tools/call");
    assert_eq!(
        calls[0].header("x-team").as_deref(),
        Some(secret),
        "the header reaches the server"
    );

    // The server forgets every session: the next call is renewed without the client noticing.
    let initialized = upstream.posts_of("initialize").len();
    expire.store(100, std::sync::atomic::Ordering::SeqCst);
    let second = rpc(
        &serve,
        &session,
        2,
        "tools/call",
        json!({"name": "far__remote-echo", "arguments": {"text": "two"}}),
    )
    .await;
    assert_eq!(
        second["result"]["content"][0]["text"], "far: \"two\"",
        "{second}"
    );
    assert!(
        upstream.posts_of("initialize").len() > initialized,
        "the session was initialized again"
    );

    // The header's value is on no command line and in no log line.
    for pid in std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
    {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("MCP_STDIO_REMOTE_HEADER") {
            assert!(!cmdline.contains(secret), "{cmdline}");
        }
    }
    assert!(
        serve.stderr().contains("MCP_STDIO_REMOTE_HEADER_0"),
        "the relay was started"
    );
    assert!(!serve.stderr().contains(secret));
}

/// The serve process's children running `sleep`.
fn sleepers(serve: &Serve) -> usize {
    children_of(serve.child.id().unwrap())
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).starts_with("sleep"))
        })
        .count()
}

#[tokio::test]
async fn a_fan_out_asks_at_most_aggregate_concurrency_servers_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[servers.mute1]\ncommand = \"sleep\"\nargs = [\"60\"]\n[servers.mute2]\ncommand = \"sleep\"\nargs = [\"60\"]\n";
    let file = write(dir.path(), text);
    for (concurrency, at_once) in [("1", 1), ("2", 2)] {
        let flags = [
            "--aggregate",
            "--aggregate-timeout",
            "1",
            "--aggregate-concurrency",
            concurrency,
            "--spare-budget",
            "0",
        ];
        let serve = start(&file, &flags).await;
        let body = initialize_body();
        let init = serve.send("POST", "/mcp", &[], &body);
        let watch = async {
            eventually("the servers are being started", async || {
                let n = sleepers(&serve);
                (n == at_once).then_some(()).ok_or(format!("{n} at once"))
            })
            .await;
            // With one at a time, the second is not started while the first is asked.
            assert_eq!(
                sleepers(&serve),
                at_once,
                "--aggregate-concurrency {concurrency}"
            );
        };
        let (answer, ()) = tokio::join!(init, watch);
        assert_eq!(
            answer.status, 200,
            "fail open: initialize answers without them"
        );
    }
}

#[tokio::test]
async fn a_2026_call_its_client_abandons_frees_its_place_on_the_server() {
    let (_dir, serve) = alpha_and_beta().await;
    // The principal's session with beta is open (nothing else is pending there later).
    let echo_params = json!({"name": "beta__echo", "arguments": {"text": "warm"}});
    let (headers, body) = modern_request(json!(0), "tools/call", echo_params, Some("beta__echo"));
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let echo = serve.send("POST", "/mcp", &headers, &body).await;
    assert!(echo.body.contains("warm"), "{}", echo.body);
    let params = json!({"name": "beta__slow", "arguments": {"ms": 60000}});
    let (headers, body) = modern_request(json!(1), "tools/call", params, Some("beta__slow"));
    let mut request = http::Request::builder()
        .method("POST")
        .uri(serve.url.replace("/alpha/mcp", "/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in &headers {
        request = request.header(k, v);
    }
    let request = request.body(Full::new(Bytes::from(body))).unwrap();
    let pending = |n: u64| {
        let serve = &serve;
        async move {
            eventually(&format!("{n} call(s) pending on beta"), async || {
                let metrics = serve.send("GET", "/metrics", &[], "").await.body;
                let line = format!("mcp_stdio_pending_requests{{server=\"beta\"}} {n}");
                metrics.contains(&line).then_some(()).ok_or(metrics)
            })
            .await
        }
    };
    let call = tokio::spawn(serve.http.request(request));
    pending(1).await;
    call.abort();
    // The client went away: the server is told, and its session holds nothing for it.
    pending(0).await;
    serve.wait_stderr("fixture: cancelled").await;
}

#[tokio::test]
async fn the_audit_line_names_the_member_server_each_request_went_to() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        &format!(
            "{}{}",
            full_entry("alpha", 100, ""),
            full_entry("beta", 100, "")
        ),
    );
    let audit = dir.path().join("audit.log");
    let serve = start(
        &file,
        &["--aggregate", "--audit-log", audit.to_str().unwrap()],
    )
    .await;
    let init = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    let session = init.session();
    let calls = [
        (
            "tools/call",
            json!({"name": "alpha__echo", "arguments": {"text": "a"}}),
        ),
        ("prompts/get", json!({"name": "beta__greet"})),
        ("resources/read", json!({"uri": "beta+fixture://note"})),
        ("tools/list", json!({})),
    ];
    for (id, (method, params)) in calls.iter().enumerate() {
        let answer = rpc(&serve, &session, 10 + id as u64, method, params.clone()).await;
        assert!(answer["result"].is_object(), "{answer}");
    }
    let modern = serve
        .modern(
            json!(20),
            "tools/call",
            json!({"name": "beta__echo", "arguments": {"text": "b"}}),
            Some("beta__echo"),
        )
        .await;
    assert_eq!(modern.status, 200, "{}", modern.body);
    let lines = eventually("the audit lines of five requests", async || {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["method"] != "initialize")
            .collect();
        (lines.len() >= 5)
            .then_some(lines.clone())
            .ok_or(format!("{lines:?}"))
    })
    .await;
    let backend_of = |id: u64| {
        let line = lines
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("no line for {id}: {lines:?}"));
        assert_eq!(line["server"], "aggregate/aggregate", "{line}");
        line.get("backend").cloned()
    };
    assert_eq!(backend_of(10), Some(json!("alpha")));
    assert_eq!(backend_of(11), Some(json!("beta")));
    assert_eq!(backend_of(12), Some(json!("beta")));
    assert_eq!(backend_of(13), None, "a list goes to every server");
    assert_eq!(backend_of(20), Some(json!("beta")), "the 2026 era too");
}
