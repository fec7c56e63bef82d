//! The tasks extension (SEP-2663) at serve's 2026-07-28 endpoint: a child that speaks it
//! gets `tasks/*` passed through once the ladder has checked the routing header
//! (`Mcp-Name` names the task) and the client's opt-in (-32021 with the capability that is
//! missing); a handshake-era child's 2025-11-25 tasks are not shown to 2026-07-28 clients
//! (no `tasks` capability in `server/discover`, no stray `task` parameter reaching it,
//! every task id unknown), and pass through a handshake-era session untouched.

use serde_json::{Value, json};

use crate::common::modern::CLIENT_CAPABILITIES;
use crate::common::serve::*;

pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `params` from a client that opted in to the tasks extension.
pub(crate) fn opted_in(mut params: Value) -> Value {
    params["_meta"] = json!({CLIENT_CAPABILITIES: {"extensions": {EXTENSION: {}}}});
    crate::common::modern::enveloped(params)
}

/// The JSON-RPC answer in a session's reply, plain or the last message of its SSE stream
/// (the child's status notifications may come first, as a session passes them on).
fn answer_of(reply: &Answer) -> Value {
    if reply.body.trim_start().starts_with('{') {
        return reply.json();
    }
    reply
        .events()
        .into_iter()
        .rfind(|e| e.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {}", reply.body))
}

pub(crate) fn error_code(answer: &Answer) -> (u16, Option<i64>) {
    (answer.status, answer.json()["error"]["code"].as_i64())
}

#[tokio::test]
async fn a_child_that_speaks_the_extension_gets_tasks_passed_through_after_the_ladder() {
    let fixture = fixture();
    let env = [("FIXTURE_ERA", "modern"), ("FIXTURE_TASKS", "1")];
    let serve = Serve::start_with(&[], &[fixture.as_str()], &env).await;
    let discover = serve
        .modern(json!(1), "server/discover", json!({}), None)
        .await;
    assert_eq!(
        discover.json()["result"]["capabilities"]["extensions"][EXTENSION],
        json!({}),
        "{}",
        discover.body
    );
    let get = |id: u64, task: &str, name: &str, params: fn(Value) -> Value| {
        let serve = &serve;
        let (task, name) = (task.to_owned(), name.to_owned());
        async move {
            serve
                .modern(
                    json!(id),
                    "tasks/get",
                    params(json!({"taskId": task})),
                    Some(&name),
                )
                .await
        }
    };
    let known = get(2, "t-known", "t-known", opted_in).await;
    assert_eq!(
        known.json()["result"]["status"],
        "working",
        "{}",
        known.body
    );
    assert_eq!(known.json()["result"]["taskId"], "t-known");
    let unknown = get(3, "t-other", "t-other", opted_in).await;
    assert_eq!(
        error_code(&unknown).1,
        Some(-32602),
        "the child's own answer"
    );
    // The routing header names another task: refused before the child hears of it.
    let mismatched = get(4, "t-known", "t-other", opted_in).await;
    assert_eq!(
        error_code(&mismatched),
        (400, Some(-32020)),
        "{}",
        mismatched.body
    );
    // No opt-in: -32021, naming the extension.
    let undeclared = get(5, "t-known", "t-known", |p| p).await;
    assert_eq!(
        error_code(&undeclared),
        (400, Some(-32021)),
        "{}",
        undeclared.body
    );
    assert_eq!(
        undeclared.json()["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION],
        json!({})
    );
    // 2025-11-25's result and list methods do not exist in 2026-07-28.
    let gone = serve
        .modern(
            json!(6),
            "tasks/result",
            opted_in(json!({"taskId": "t-known"})),
            None,
        )
        .await;
    assert_eq!(error_code(&gone), (404, Some(-32601)));
}

#[tokio::test]
async fn a_handshake_era_child_without_tool_tasks_offers_none_and_a_stray_task_parameter_is_removed()
 {
    let fixture = fixture();
    // A child that does not run tools as tasks: no extension, every task id unknown.
    let plain = Serve::start_with(&[], &[fixture.as_str()], &[]).await;
    let discover = plain
        .modern(json!(1), "server/discover", json!({}), None)
        .await;
    let capabilities = &discover.json()["result"]["capabilities"];
    assert!(capabilities.get("tasks").is_none(), "{capabilities}");
    assert!(
        capabilities["extensions"].get(EXTENSION).is_none(),
        "{capabilities}"
    );
    let get = plain
        .modern(
            json!(3),
            "tasks/get",
            opted_in(json!({"taskId": "t-known"})),
            Some("t-known"),
        )
        .await;
    assert_eq!(error_code(&get), (200, Some(-32602)), "{}", get.body);
    // A child that does, and a tool that does not: a stray 2025-11-25 `task` parameter does
    // not reach the child (which would make a task of it), even from an opted-in client.
    let tasking = Serve::start_with(&[], &[fixture.as_str()], &[("FIXTURE_TASKS", "1")]).await;
    let called = tasking
        .modern(
            json!(2),
            "tools/call",
            opted_in(
                json!({"name": "echo", "arguments": {"text": "plain"}, "task": {"ttl": 60000}}),
            ),
            Some("echo"),
        )
        .await;
    assert_eq!(
        called.json()["result"]["content"][0]["text"],
        "plain",
        "{}",
        called.body
    );
}

#[tokio::test]
async fn a_handshake_era_session_passes_2025_11_25_tasks_through_untouched() {
    let fixture = fixture();
    let serve = Serve::start_with(&[], &[fixture.as_str()], &[("FIXTURE_TASKS", "1")]).await;
    let opened = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(
        opened.json()["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "the child's capability, as it is: {}",
        opened.body
    );
    let session = opened.session();
    let created = serve
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "job", "arguments": {"seconds": 0}, "task": {"ttl": 60000}}}),
        )
        .await;
    let created_answer = answer_of(&created);
    let task = &created_answer["result"]["task"];
    assert_eq!(
        task["ttl"], 60000,
        "the child's own task, as it is: {}",
        created.body
    );
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    assert!(
        id.starts_with("legacy-"),
        "the child's id, not one of the gateway's: {id}"
    );
    let got = serve
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": id}}),
        )
        .await;
    assert_eq!(answer_of(&got)["result"]["taskId"], id, "{}", got.body);
    // 2025-11-25's tasks/result, which 2026-07-28 removed, with its related-task `_meta`.
    let result = serve
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}}),
        )
        .await;
    let result = &answer_of(&result)["result"];
    assert_eq!(result["content"][0]["text"], "job done: job", "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id
    );
}
