//! `serve --policy FILE`: per-principal rules in front of the stdio fixture, for both
//! eras. Lists are filtered per principal (cursors still right), a hidden tool called
//! anyway looks unknown, a visible call refused by a rule is a tool error naming the rule,
//! every variable reaches the rules (claims, groups, annotations, arguments, method,
//! resource URI, prompt, client), SIGHUP keeps the old policy when the new one is broken,
//! and an aggregate endpoint's rules see the member server and its own names.

use serde_json::{Value, json};

use crate::common::issuer::{Issuer, SigningKey};
use crate::common::serve::*;

const AUDIENCE: &str = "http://127.0.0.1/mcp";
const SCOPE: &str = "mcp:tools";

const POLICY: &str = r#"
[[rules]]
name = "crash-is-for-admins"
phase = "list"
effect = "deny"
when = "tool.name == 'crash' && !('admins' in principal.groups)"

[[rules]]
name = "no-notes-for-contractors"
phase = "list"
effect = "deny"
when = "principal.claims.role == 'contractor' && (resource.uri.startsWith('fixture://note') || prompt.name == 'greet')"

[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"

[[rules]]
name = "contractors-read-only"
phase = "call"
effect = "deny"
when = "method == 'tools/call' && principal.claims.role == 'contractor' && !tool.annotations.readOnlyHint"
message = "contractors may only use read-only tools"

[[rules]]
name = "short-echoes"
phase = "call"
effect = "require"
when = "tool.name != 'echo' || !has(arguments.text) || size(arguments.text) <= 10"

[[rules]]
name = "no-bad-clients"
phase = "call"
effect = "deny"
when = "client.name == 'bad-client'"

[[rules]]
name = "signed-in"
phase = "call"
effect = "allow"
when = "principal.authenticated"
"#;

struct Setup {
    _dir: tempfile::TempDir,
    policy: std::path::PathBuf,
    issuer: Issuer,
    key: SigningKey,
}

impl Setup {
    async fn new(policy: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, policy).unwrap();
        let key = SigningKey::generate("k1");
        let issuer = Issuer::start(&[&key]).await;
        Setup {
            _dir: dir,
            policy: path,
            issuer,
            key,
        }
    }

    async fn serve(&self, env: &[(&str, &str)]) -> Serve {
        let flags = [
            "--oauth-issuer",
            self.issuer.url.as_str(),
            "--oauth-audience",
            AUDIENCE,
            "--oauth-scope",
            SCOPE,
            "--log-level",
            "debug",
            "--policy",
            self.policy.to_str().unwrap(),
        ];
        Serve::start_with(&flags, &[fixture().as_str()], env).await
    }

    /// A token for `sub` with `extra` claims.
    fn token(&self, sub: &str, extra: Value) -> String {
        let mut claims = self.issuer.claims(sub, AUDIENCE, SCOPE);
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        format!("Bearer {}", self.key.sign(&claims, None))
    }
}

/// A handshake-era session as `bearer`, its client called `client`.
async fn session(serve: &Serve, bearer: &str, client: &str) -> String {
    let body = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":client,"version":"1"}}});
    let answer = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", bearer)],
            &body.to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.session()
}

async fn request(serve: &Serve, bearer: &str, session: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc":"2.0","id":7,"method":method,"params":params});
    let answer = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", bearer), ("mcp-session-id", session)],
            &body.to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    match answer
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap())
    {
        Some(t) if t.starts_with("text/event-stream") => answer.events().pop().unwrap(),
        _ => answer.json(),
    }
}

fn names(answer: &Value, key: &str, field: &str) -> Vec<String> {
    answer["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {answer}"))
        .iter()
        .map(|t| t[field].as_str().unwrap().to_owned())
        .collect()
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn each_principal_sees_its_own_lists_and_calls_are_hidden_or_refused_with_the_rule() {
    let setup = Setup::new(POLICY).await;
    let serve = setup.serve(&[("FIXTURE_CATALOG", "full")]).await;
    let ada = setup.token("ada", json!({"role": "employee", "groups": ["admins"]}));
    let bob = setup.token("bob", json!({"role": "contractor"}));
    let (ada_session, bob_session) = (
        session(&serve, &ada, "t").await,
        session(&serve, &bob, "t").await,
    );

    // Lists: the claims and groups decide.
    let ada_tools = names(
        &request(&serve, &ada, &ada_session, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    let bob_tools = names(
        &request(&serve, &bob, &bob_session, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    assert!(ada_tools.contains(&"crash".to_owned()), "{ada_tools:?}");
    assert!(!bob_tools.contains(&"crash".to_owned()), "{bob_tools:?}");
    assert_eq!(ada_tools.len(), bob_tools.len() + 1);
    let listed = request(&serve, &bob, &bob_session, "resources/list", json!({})).await;
    assert_eq!(names(&listed, "resources", "uri"), Vec::<String>::new());
    let listed = request(&serve, &bob, &bob_session, "prompts/list", json!({})).await;
    assert_eq!(names(&listed, "prompts", "name"), Vec::<String>::new());
    let listed = request(&serve, &ada, &ada_session, "prompts/list", json!({})).await;
    assert_eq!(names(&listed, "prompts", "name"), vec!["greet"]);

    // Hidden and called anyway: as if it did not exist.
    let hidden = request(
        &serve,
        &bob,
        &bob_session,
        "tools/call",
        json!({"name": "crash", "arguments": {}}),
    )
    .await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    assert_eq!(hidden["error"]["message"], "Unknown tool: crash");
    let hidden = request(
        &serve,
        &bob,
        &bob_session,
        "resources/read",
        json!({"uri": "fixture://note"}),
    )
    .await;
    assert_eq!(hidden["error"]["code"], -32002, "{hidden}");
    let hidden = request(
        &serve,
        &bob,
        &bob_session,
        "prompts/get",
        json!({"name": "greet"}),
    )
    .await;
    assert_eq!(
        hidden["error"]["message"], "Unknown prompt: greet",
        "{hidden}"
    );

    // Visible but refused: a tool error that names the rule and says why (annotations:
    // `slow` has none, so the MCP defaults say it is not read-only).
    let refused = request(
        &serve,
        &bob,
        &bob_session,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 1}}),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        text(&refused),
        "Refused by the gateway's policy rule \"contractors-read-only\": contractors may only use read-only tools"
    );
    let echoed = request(
        &serve,
        &bob,
        &bob_session,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    )
    .await;
    assert_eq!(text(&echoed), "hi", "{echoed}");
    // An argument rule.
    let long = request(
        &serve,
        &bob,
        &bob_session,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "far too long a text"}}),
    )
    .await;
    assert_eq!(long["result"]["isError"], true, "{long}");
    assert!(text(&long).contains("\"short-echoes\""), "{long}");

    // The same calls are the admin's to make.
    let slept = request(
        &serve,
        &ada,
        &ada_session,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 1}}),
    )
    .await;
    assert_eq!(text(&slept), "slept", "{slept}");
    let read = request(
        &serve,
        &ada,
        &ada_session,
        "resources/read",
        json!({"uri": "fixture://note"}),
    )
    .await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "read fixture://note",
        "{read}"
    );

    // A call before any list: the tool's annotations are looked up first.
    let fresh = session(&serve, &bob, "t").await;
    let echoed = request(
        &serve,
        &bob,
        &fresh,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "first"}}),
    )
    .await;
    assert_eq!(text(&echoed), "first", "{echoed}");

    // The client's name, from its initialize.
    let bad = session(&serve, &ada, "bad-client").await;
    let refused = request(
        &serve,
        &ada,
        &bad,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    )
    .await;
    assert!(text(&refused).contains("\"no-bad-clients\""), "{refused}");

    // Methods the policy does not govern pass.
    let pong = request(&serve, &bob, &bob_session, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");

    // Params the policy cannot read do not reach the server unjudged.
    let unreadable = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"crash","arguments":{"x":1e400}}}"#;
    let headers = [
        ("authorization", bob.as_str()),
        ("mcp-session-id", bob_session.as_str()),
    ];
    let answer = serve
        .send("POST", "/mcp", &headers, unreadable)
        .await
        .json();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // serde_json's private RawValue key would make the policy judge other arguments than
    // the server gets (here `{"text":"x"}` for an object the server reads as one odd key).
    let smuggled = r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"\u0024serde_json::private::RawValue":"{\"text\":\"x\"}"}}}"#;
    let answer = serve.send("POST", "/mcp", &headers, smuggled).await.json();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("policy cannot read"), "{answer}");
    // A call sent as a notification is not passed on (`crash` would end the child).
    let notified = json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "crash"}});
    let accepted = serve
        .send("POST", "/mcp", &headers, &notified.to_string())
        .await;
    assert_eq!(accepted.status, 202);
    let echoed = request(
        &serve,
        &bob,
        &bob_session,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "alive"}}),
    )
    .await;
    assert_eq!(text(&echoed), "alive", "the child is alive: {echoed}");
}

#[tokio::test]
async fn a_2026_client_gets_the_same_decisions_in_its_own_era() {
    let setup = Setup::new(POLICY).await;
    let serve = setup.serve(&[]).await;
    let bob = setup.token("bob", json!({"role": "contractor"}));
    let modern = async |id: u64, method: &str, params: Value, name: Option<&str>| {
        let answer = serve
            .modern_with(json!(id), method, params, name, &[("authorization", &bob)])
            .await;
        answer.json()
    };
    let listed = modern(1, "tools/list", json!({}), None).await;
    let tools = names(&listed, "tools", "name");
    assert!(
        !tools.contains(&"crash".to_owned()) && tools.contains(&"echo".to_owned()),
        "{tools:?}"
    );
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    let hidden = modern(
        2,
        "tools/call",
        json!({"name": "crash", "arguments": {}}),
        Some("crash"),
    )
    .await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    let refused = modern(
        3,
        "tools/call",
        json!({"name": "slow", "arguments": {}}),
        Some("slow"),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert!(text(&refused).contains("contractors may only use read-only tools"));
    let echoed = modern(
        4,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
        Some("echo"),
    )
    .await;
    assert_eq!(text(&echoed), "hi", "{echoed}");
}

/// Completions, subscriptions and resource templates are judged like the rest: a contractor
/// sees no note template, cannot subscribe to a note or complete the hidden prompt (each
/// answered as if it did not exist), and a completion's argument reaches the call rules.
#[tokio::test]
async fn completions_subscriptions_and_templates_are_judged_like_the_rest() {
    let policy = format!(
        "{POLICY}\n[[rules]]\nname = \"no-secret-completions\"\nphase = \"call\"\neffect = \"deny\"\nwhen = \"method == 'completion/complete' && has(arguments.value) && arguments.value.startsWith('secret')\"\nmessage = \"no completing secrets\"\n"
    );
    let setup = Setup::new(&policy).await;
    let serve = setup.serve(&[("FIXTURE_CATALOG", "full")]).await;
    let ada = setup.token("ada", json!({"role": "employee"}));
    let bob = setup.token("bob", json!({"role": "contractor"}));
    let (ada_session, bob_session) = (
        session(&serve, &ada, "t").await,
        session(&serve, &bob, "t").await,
    );
    let templates = |answer: &Value| names(answer, "resourceTemplates", "uriTemplate");
    let listed = request(
        &serve,
        &ada,
        &ada_session,
        "resources/templates/list",
        json!({}),
    )
    .await;
    assert_eq!(
        templates(&listed),
        vec!["fixture://notes/{id}"],
        "the channel is alive"
    );
    let listed = request(
        &serve,
        &bob,
        &bob_session,
        "resources/templates/list",
        json!({}),
    )
    .await;
    assert_eq!(templates(&listed), Vec::<String>::new());

    let note = json!({"uri": "fixture://note"});
    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let allowed = request(&serve, &ada, &ada_session, method, note.clone()).await;
        assert_eq!(allowed["result"], json!({}), "{method}: {allowed}");
        let hidden = request(&serve, &bob, &bob_session, method, note.clone()).await;
        assert_eq!(hidden["error"]["code"], -32002, "{method}: {hidden}");
        assert_eq!(hidden["error"]["data"]["uri"], "fixture://note");
    }

    let complete = |value: &str| {
        json!({"ref": {"type": "ref/prompt", "name": "greet"},
               "argument": {"name": "who", "value": value}})
    };
    let completed = request(
        &serve,
        &ada,
        &ada_session,
        "completion/complete",
        complete("wor"),
    )
    .await;
    assert!(
        completed["result"]["completion"]["values"].is_array(),
        "{completed}"
    );
    let hidden = request(
        &serve,
        &bob,
        &bob_session,
        "completion/complete",
        complete("wor"),
    )
    .await;
    assert_eq!(
        hidden["error"]["message"], "Unknown prompt: greet",
        "{hidden}"
    );
    let refused = request(
        &serve,
        &ada,
        &ada_session,
        "completion/complete",
        complete("secret-1"),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["data"]["refusedBy"],
        "no-secret-completions"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no completing secrets"),
        "{refused}"
    );
    // A completion for a resource template: the template's URI is what the rules see.
    let for_template = json!({"ref": {"type": "ref/resource", "uri": "fixture://notes/{id}"},
                              "argument": {"name": "id", "value": "1"}});
    let hidden = request(
        &serve,
        &bob,
        &bob_session,
        "completion/complete",
        for_template.clone(),
    )
    .await;
    assert_eq!(hidden["error"]["code"], -32002, "{hidden}");
    let completed = request(
        &serve,
        &ada,
        &ada_session,
        "completion/complete",
        for_template,
    )
    .await;
    assert!(completed["result"]["completion"].is_object(), "{completed}");
}

#[tokio::test]
async fn a_filtered_list_pages_with_the_servers_cursors() {
    let policy = r#"
[[rules]]
name = "no-a"
phase = "list"
effect = "deny"
when = "tool.name.startsWith('a')"

[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"
"#;
    let setup = Setup::new(policy).await;
    let serve = setup.serve(&[("FIXTURE_PAGE_SIZE", "3")]).await;
    let ada = setup.token("ada", json!({}));
    let session = session(&serve, &ada, "t").await;
    let (seen, pages) = every_name(&serve, &ada, &session, "tools/list", "tools", "name").await;
    // 15 tools in pages of 3; ask, ask-later, announce and announce-burst hidden.
    assert_eq!(pages, 5);
    assert_eq!(seen.len(), 11, "{seen:?}");
    assert!(seen.iter().all(|n| !n.starts_with('a')), "{seen:?}");
}

/// Every page of a list as `bearer`, following the cursors: the names and the page count.
async fn every_name(
    serve: &Serve,
    bearer: &str,
    session: &str,
    method: &str,
    key: &str,
    field: &str,
) -> (Vec<String>, usize) {
    let (mut seen, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = request(serve, bearer, session, method, params).await;
        seen.extend(names(&page, key, field));
        pages += 1;
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (seen, pages),
        }
    }
}

#[tokio::test]
async fn filtered_prompt_and_resource_lists_page_with_the_servers_cursors() {
    let policy = r#"
[[rules]]
name = "no-odd-prompts"
phase = "list"
effect = "deny"
when = "prompt.name.matches('^prompt-[0-9]*[13579]$')"

[[rules]]
name = "docs-are-for-staff"
phase = "list"
effect = "deny"
when = "resource.uri.startsWith('fixture://doc/') && !('staff' in principal.groups)"

[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"
"#;
    let setup = Setup::new(policy).await;
    let serve = setup
        .serve(&[
            ("FIXTURE_CATALOG", "full"),
            ("FIXTURE_PAGE_SIZE", "2"),
            ("FIXTURE_EXTRA_ITEMS", "6"),
        ])
        .await;
    let ada = setup.token("ada", json!({"groups": ["staff"]}));
    let bob = setup.token("bob", json!({}));
    let ada_session = session(&serve, &ada, "t").await;
    let bob_session = session(&serve, &bob, "t").await;
    // greet and prompt-1..6 in pages of 2: four pages, the odd ones hidden (one page empty
    // but for its cursor).
    let (prompts, pages) = every_name(
        &serve,
        &ada,
        &ada_session,
        "prompts/list",
        "prompts",
        "name",
    )
    .await;
    assert_eq!(pages, 4);
    assert_eq!(prompts, ["greet", "prompt-2", "prompt-4", "prompt-6"]);
    let (uris, pages) = every_name(
        &serve,
        &ada,
        &ada_session,
        "resources/list",
        "resources",
        "uri",
    )
    .await;
    assert_eq!(pages, 4);
    assert_eq!(uris.len(), 7, "staff sees every resource: {uris:?}");
    let (uris, pages) = every_name(
        &serve,
        &bob,
        &bob_session,
        "resources/list",
        "resources",
        "uri",
    )
    .await;
    assert_eq!(pages, 4, "the same cursors for everyone");
    assert_eq!(uris, ["fixture://note"]);
    // A hidden prompt asked for anyway looks unknown; a visible one answers.
    let shown = request(
        &serve,
        &ada,
        &ada_session,
        "prompts/get",
        json!({"name": "prompt-2"}),
    )
    .await;
    assert!(shown["result"]["messages"].is_array(), "{shown}");
    let hidden = request(
        &serve,
        &ada,
        &ada_session,
        "prompts/get",
        json!({"name": "prompt-3"}),
    )
    .await;
    assert!(hidden["error"].is_object(), "{hidden}");
}

#[tokio::test]
async fn a_list_answer_the_policy_cannot_read_is_refused_not_passed_unfiltered() {
    let policy = r#"
[[rules]]
name = "no-echo"
phase = "list"
effect = "deny"
when = "tool.name == 'echo'"

[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"
"#;
    let setup = Setup::new(policy).await;
    let serve = setup.serve(&[("FIXTURE_TOOLS_LIST", "object")]).await;
    let ada = setup.token("ada", json!({}));
    let session = session(&serve, &ada, "t").await;
    // The channel is alive: other requests are answered as usual.
    let ping = request(&serve, &ada, &session, "ping", json!({})).await;
    assert_eq!(ping["result"], json!({}), "{ping}");
    let answer = request(&serve, &ada, &session, "tools/list", json!({})).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`tools` that is not an array"),
        "{message}"
    );
    assert!(!answer.to_string().contains("inputSchema"), "{answer}");
}

#[tokio::test]
async fn sighup_reloads_the_policy_and_a_broken_one_keeps_the_rules_in_force() {
    let deny_echo = "[[rules]]\nname = \"no-echo\"\nphase = \"call\"\neffect = \"deny\"\nwhen = \"tool.name == 'echo'\"\n\n[[rules]]\nname = \"rest\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"true\"\n";
    let setup = Setup::new(deny_echo).await;
    let serve = setup.serve(&[]).await;
    let ada = setup.token("ada", json!({}));
    let session = session(&serve, &ada, "t").await;
    let echo = json!({"name": "echo", "arguments": {"text": "x"}});
    let refused = request(&serve, &ada, &session, "tools/call", echo.clone()).await;
    assert!(text(&refused).contains("\"no-echo\""), "{refused}");

    let hangup = || {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(serve.child.id().unwrap() as i32).unwrap(),
            rustix::process::Signal::HUP,
        )
        .unwrap()
    };
    // Broken: an unknown variable. The old rules stay, and the log says why.
    std::fs::write(
        &setup.policy,
        deny_echo.replace("tool.name", "tool.nmae == 'x' || user"),
    )
    .unwrap();
    hangup();
    serve.wait_stderr("SIGHUP: the policy in force stays").await;
    assert!(
        serve.stderr().contains("unknown variable `user`"),
        "{}",
        serve.stderr()
    );
    let refused = request(&serve, &ada, &session, "tools/call", echo.clone()).await;
    assert!(text(&refused).contains("\"no-echo\""), "{refused}");

    // Empty (a file caught half written): a policy with rules is not replaced by none.
    std::fs::write(&setup.policy, "").unwrap();
    hangup();
    serve.wait_stderr("the policy now has no rules").await;
    let refused = request(&serve, &ada, &session, "tools/call", echo.clone()).await;
    assert!(text(&refused).contains("\"no-echo\""), "{refused}");

    // Fixed: the new rules apply to the next request of the same session.
    std::fs::write(
        &setup.policy,
        "[[rules]]\nname = \"all\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"true\"\n",
    )
    .unwrap();
    hangup();
    serve.wait_stderr("SIGHUP: the policy reloaded").await;
    let echoed = request(&serve, &ada, &session, "tools/call", echo).await;
    assert_eq!(text(&echoed), "x", "{echoed}");
}

#[tokio::test]
async fn a_broken_policy_stops_serve_from_starting_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        "[[rules]]\nname = \"x\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"tool.name ==\"\n",
    )
    .unwrap();
    let output = std::process::Command::new(crate::common::binary())
        .args(["serve", "--port", "0", "--policy"])
        .arg(&path)
        .args(["--", fixture().as_str()])
        .env_remove("MCP_STDIO_SERVE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("rule \"x\": not a CEL expression"), "{err}");
}

#[tokio::test]
async fn an_aggregate_endpoints_rules_see_the_member_server_and_its_own_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    let fixture = fixture();
    std::fs::write(
        &file,
        format!(
            r#"
[servers.a]
command = "{fixture}"
spare_children = 0

[servers.b]
command = "{fixture}"
spare_children = 0

[aggregates.all]
servers = ["a", "b"]

[[policy.rules]]
name = "no-b-crash"
phase = "list"
effect = "deny"
when = "server == 'b' && tool.name == 'crash'"

[[policy.rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"

[[policy.rules]]
name = "a-is-not-slow"
phase = "call"
effect = "deny"
when = "server == 'a' && tool.name == 'slow'"

[[policy.rules]]
name = "calls"
phase = "call"
effect = "allow"
when = "true"
"#
        ),
    )
    .unwrap();
    let serve = Serve::start_config(&file, &[], &[]).await;
    let at = async |path: &str| {
        let body = initialize_body();
        let answer = serve.send("POST", path, &[], &body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.session()
    };
    let session = at("/all/mcp").await;
    let call = async |session: &str, path: &str, method: &str, params: Value| {
        let body = json!({"jsonrpc":"2.0","id":3,"method":method,"params":params});
        let answer = serve
            .send(
                "POST",
                path,
                &[("mcp-session-id", session)],
                &body.to_string(),
            )
            .await;
        answer.json()
    };
    // A direct call before any list is still judged by the member's own name.
    let refused = call(
        &session,
        "/all/mcp",
        "tools/call",
        json!({"name": "a__slow", "arguments": {"ms": 1}}),
    )
    .await;
    assert!(text(&refused).contains("\"a-is-not-slow\""), "{refused}");
    let hidden = call(
        &session,
        "/all/mcp",
        "tools/call",
        json!({"name": "b__crash", "arguments": {}}),
    )
    .await;
    assert_eq!(
        hidden["error"]["message"], "Unknown tool: b__crash",
        "{hidden}"
    );
    // A name no server publishes is never judged by the wrong name.
    let nobody = call(
        &session,
        "/all/mcp",
        "tools/call",
        json!({"name": "c__slow", "arguments": {}}),
    )
    .await;
    assert_eq!(
        nobody["error"]["message"], "Unknown tool: c__slow",
        "{nobody}"
    );
    let listed = call(&session, "/all/mcp", "tools/list", json!({})).await;
    let tools = names(&listed, "tools", "name");
    assert!(
        tools.contains(&"a__crash".to_owned()) && !tools.contains(&"b__crash".to_owned()),
        "{tools:?}"
    );
    let slept = call(
        &session,
        "/all/mcp",
        "tools/call",
        json!({"name": "b__slow", "arguments": {"ms": 1}}),
    )
    .await;
    assert_eq!(text(&slept), "slept", "{slept}");

    // The servers' own endpoints hold the same rules, with their own names.
    let direct = at("/a/mcp").await;
    let refused = call(
        &direct,
        "/a/mcp",
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 1}}),
    )
    .await;
    assert!(text(&refused).contains("\"a-is-not-slow\""), "{refused}");
}

#[tokio::test]
async fn a_replica_forwards_what_the_rules_see_of_the_caller_to_the_sessions_owner() {
    let policy = "[[rules]]\nname = \"admins\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"'admins' in principal.groups && principal.claims.role == 'ops'\"\n";
    let setup = Setup::new(policy).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("cluster.key");
    std::fs::write(
        &key,
        "a-cluster-key-of-more-than-thirty-two-bytes-for-tests\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let advertise = format!("http://127.0.0.1:{port}");
        let flags = [
            "--port",
            &port,
            "--cluster-key-file",
            key.to_str().unwrap(),
            "--advertise-url",
            &advertise,
            "--oauth-issuer",
            setup.issuer.url.as_str(),
            "--oauth-audience",
            AUDIENCE,
            "--oauth-scope",
            SCOPE,
            "--policy",
            setup.policy.to_str().unwrap(),
        ];
        replicas.push(Serve::start_with(&flags, &[fixture().as_str()], &[]).await);
    }
    let ops = setup.token("ada", json!({"role": "ops", "groups": ["admins"]}));
    let guest = setup.token("gus", json!({"role": "guest", "groups": ["admins"]}));
    let echo = json!({"name": "echo", "arguments": {"text": "via b"}});
    for (bearer, allowed) in [(&ops, true), (&guest, false)] {
        // The session lives on the first replica; its calls land on the second.
        let session = session(&replicas[0], bearer, "t").await;
        let answer = request(&replicas[1], bearer, &session, "tools/call", echo.clone()).await;
        if allowed {
            assert_eq!(text(&answer), "via b", "{answer}");
        } else {
            assert_eq!(answer["result"]["isError"], true, "{answer}");
        }
    }
}
