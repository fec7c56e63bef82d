//! A 2025-11-25 host's tasks through the relay to a 2026-07-28 server that speaks the tasks
//! extension (a fake that checks the opt-in and the routing header on every request): the
//! `tasks` capability offered, a task-augmented call sent opted in without its `task`
//! parameter and answered nested, the task's question put to the host tied to the task and
//! answered with `tasks/update`, `tasks/result` and `tasks/list` answered by the relay,
//! `tasks/cancel` reaching the server, and `--max-tasks`.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::common::modern::MODERN;
use crate::common::*;

const EXTENSION: &str = "io.modelcontextprotocol/tasks";
const RELATED: &str = "io.modelcontextprotocol/related-task";

#[derive(Default)]
struct FakeTasks {
    /// The host's answer to the task's question, once `tasks/update` brought it.
    answered: Option<Value>,
    cancelled: bool,
}

fn error(id: &Value, code: i64, message: &str) -> Reply {
    json_reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn task_view(status: &str) -> Value {
    json!({"resultType": "complete", "taskId": "t-1", "status": status, "ttlMs": 60000,
           "pollIntervalMs": 50, "createdAt": "2026-12-07T10:00:00Z", "lastUpdatedAt": "2026-12-07T10:00:01Z"})
}

/// A 2026-07-28 server offering the tasks extension: `slow` becomes the task `t-1`, which
/// asks one question and then completes with the answer; `quick` answers at once.
fn tasks_server() -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    let state = Arc::new(Mutex::new(FakeTasks::default()));
    move |seen: &Seen| {
        let request = seen.json();
        let id = request["id"].clone();
        if request.get("id").is_none() {
            return Reply::Status(202);
        }
        let method = request["method"].as_str().unwrap_or_default();
        let params = &request["params"];
        let opted_in = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            .get(EXTENSION)
            .is_some();
        if seen.header("mcp-protocol-version").as_deref() != Some(MODERN) {
            return error(&id, -32022, "Unsupported protocol version");
        }
        if method.starts_with("tasks/") {
            if !opted_in {
                return error(&id, -32021, "the tasks methods need the extension");
            }
            if seen.header("mcp-name").as_deref() != params["taskId"].as_str() {
                return error(&id, -32020, "Mcp-Name does not name the task");
            }
        }
        let mut state = state.lock().unwrap();
        let result = match method {
            "server/discover" => json!({"resultType": "complete", "supportedVersions": [MODERN],
                "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
                "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks-fake", "version": "1"}}}),
            "tools/list" => json!({"resultType": "complete", "tools": [
                {"name": "slow", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
                {"name": "quick", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}),
            "tools/call" if params.get("task").is_some() => {
                return error(
                    &id,
                    -32602,
                    "a 2025-11-25 task parameter reached a 2026-07-28 server",
                );
            }
            "tools/call" if !opted_in => return error(&id, -32021, "slow runs only as a task"),
            // A task with a "forever" ttl, which the server then forgets.
            "tools/call" if params["name"] == "forever" => {
                let mut created = task_view("working");
                created["taskId"] = json!("t-forever");
                created["ttlMs"] = json!(9_007_199_254_740_992_u64);
                created["resultType"] = json!("task");
                created
            }
            "tasks/get" if params["taskId"] == "t-forever" => {
                return error(&id, -32602, "Task not found");
            }
            "tools/call" if params["name"] == "quick" => {
                json!({"resultType": "complete", "content": [{"type": "text", "text": "at once"}]})
            }
            "tools/call" => {
                let mut created = task_view("working");
                created["resultType"] = json!("task");
                created
            }
            "tasks/get" if state.cancelled => task_view("cancelled"),
            "tasks/get" => match &state.answered {
                None => {
                    let mut view = task_view("input_required");
                    view["inputRequests"] = json!({"confirm": {"method": "elicitation/create",
                        "params": {"message": "Proceed?", "requestedSchema": {"type": "object",
                            "properties": {"go": {"type": "boolean"}}}}}});
                    view
                }
                Some(answer) => {
                    let mut view = task_view("completed");
                    view["result"] = json!({"content": [{"type": "text", "text": format!("proceeded: {answer}")}]});
                    view
                }
            },
            "tasks/update" => {
                state.answered = params["inputResponses"].get("confirm").cloned();
                json!({"resultType": "complete"})
            }
            "tasks/cancel" => {
                state.cancelled = true;
                json!({"resultType": "complete"})
            }
            _ => return error(&id, -32601, "Method not found"),
        };
        json_reply(result_for(&request, result))
    }
}

async fn legacy_host(relay: &mut Relay) -> Value {
    let mut params = host_initialize_params();
    params["protocolVersion"] = json!("2025-11-25");
    let answer = relay.call(json!(0), "initialize", params).await;
    relay
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    answer
}

/// The next message with an id (answers and requests); status notifications are kept.
async fn next_with_id(relay: &mut Relay, statuses: &mut Vec<Value>) -> Value {
    loop {
        let message = relay.recv().await;
        if message.get("id").is_some() {
            return message;
        }
        if message["method"] == "notifications/tasks/status" {
            statuses.push(message["params"].clone());
        }
    }
}

/// The answer to request `id`, the messages before it passed over (statuses kept).
async fn answer_to(relay: &mut Relay, statuses: &mut Vec<Value>, id: u64) -> Value {
    loop {
        let message = next_with_id(relay, statuses).await;
        if message["id"] == id {
            return message;
        }
    }
}

#[tokio::test]
async fn a_legacy_hosts_task_runs_on_the_extension_with_its_question_tied_to_it() {
    let upstream = Upstream::start(tasks_server()).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let initialized = legacy_host(&mut relay).await;
    assert_eq!(
        initialized["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{initialized}"
    );
    let mut statuses = Vec::new();
    relay
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "slow", "arguments": {}, "task": {"ttl": 60000}}}))
        .await;
    let created = next_with_id(&mut relay, &mut statuses).await;
    let task = &created["result"]["task"];
    assert_eq!(task["taskId"], "t-1", "{created}");
    assert_eq!(task["ttl"], 60000);
    assert_eq!(task["pollInterval"], 50);
    assert!(
        created["result"].get("resultType").is_none(),
        "nested, 2025-11-25: {created}"
    );
    let sent = upstream.posts_of("tools/call");
    assert!(
        sent[0].json()["params"].get("task").is_none(),
        "the task parameter went up"
    );
    // The task's question reaches the host as a real request tied to the task.
    let question = next_with_id(&mut relay, &mut statuses).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Proceed?");
    assert_eq!(question["params"]["_meta"][RELATED]["taskId"], "t-1");
    relay
        .send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"go": true}}}))
        .await;
    // tasks/result, which 2026-07-28 removed, waits for the end.
    relay
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": "t-1"}}))
        .await;
    let result = next_with_id(&mut relay, &mut statuses).await;
    assert_eq!(result["id"], 2, "{result}");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("proceeded: ") && text.contains("\"go\":true"),
        "{result}"
    );
    assert_eq!(result["result"]["_meta"][RELATED]["taskId"], "t-1");
    let updates = upstream.posts_of("tasks/update");
    assert_eq!(updates.len(), 1, "answered once");
    let seen: Vec<&str> = statuses
        .iter()
        .filter_map(|s| s["status"].as_str())
        .collect();
    assert!(
        seen.contains(&"input_required"),
        "status notifications: {statuses:?}"
    );
    let got = relay
        .call(json!(3), "tasks/get", json!({"taskId": "t-1"}))
        .await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert!(
        got["result"].get("ttlMs").is_none() && got["result"]["ttl"] == 60000,
        "{got}"
    );
    let listed = relay.call(json!(4), "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["taskId"], "t-1", "{listed}");
    let cancel = relay
        .call(json!(5), "tasks/cancel", json!({"taskId": "t-1"}))
        .await;
    assert_eq!(
        cancel["error"]["code"], -32602,
        "an ended task cannot be cancelled: {cancel}"
    );
    let unknown = relay
        .call(json!(6), "tasks/get", json!({"taskId": "t-9"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn a_call_the_server_answers_at_once_is_a_completed_task_and_cancel_reaches_the_server() {
    let upstream = Upstream::start(tasks_server()).await;
    let mut relay = Relay::start(&upstream.url, &["--max-tasks", "2"]).await;
    legacy_host(&mut relay).await;
    let quick = relay
        .call(
            json!(1),
            "tools/call",
            json!({"name": "quick", "arguments": {}, "task": {"ttl": 1000}}),
        )
        .await;
    let id = quick["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    assert_eq!(quick["result"]["task"]["status"], "completed", "{quick}");
    // A task the server holds: cancelling it reaches the server.
    let mut statuses = Vec::new();
    relay
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "slow", "arguments": {}, "task": {"ttl": 60000}}}))
        .await;
    let created = next_with_id(&mut relay, &mut statuses).await;
    assert_eq!(created["result"]["task"]["taskId"], "t-1", "{created}");
    // Past --max-tasks: refused, naming the flag.
    relay
        .send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "slow", "arguments": {}, "task": {}}}))
        .await;
    let refused = answer_to(&mut relay, &mut statuses, 4).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-tasks (2)"), "{refused}");
    // A task whose end the host has read makes room: the quick one, read now.
    relay
        .send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": id}}),
        )
        .await;
    let result = answer_to(&mut relay, &mut statuses, 2).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "at once",
        "{result}"
    );
    relay
        .send(json!({"jsonrpc": "2.0", "id": 40, "method": "tools/call",
                     "params": {"name": "quick", "arguments": {}, "task": {}}}))
        .await;
    let again = answer_to(&mut relay, &mut statuses, 40).await;
    assert_eq!(again["result"]["task"]["status"], "completed", "{again}");
    relay
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/cancel", "params": {"taskId": "t-1"}}))
        .await;
    let cancelled = answer_to(&mut relay, &mut statuses, 5).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(upstream.posts_of("tasks/cancel").len(), 1);
}

#[tokio::test]
async fn a_task_the_server_forgets_fails_and_a_forever_ttl_is_harmless() {
    let upstream = Upstream::start(tasks_server()).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    legacy_host(&mut relay).await;
    let created = relay
        .call(
            json!(1),
            "tools/call",
            json!({"name": "forever", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(
        created["result"]["task"]["taskId"], "t-forever",
        "{created}"
    );
    // tasks/result waits for the end; the server's -32602 on the next poll is that end.
    let mut statuses = Vec::new();
    relay
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": "t-forever"}}))
        .await;
    let result = next_with_id(&mut relay, &mut statuses).await;
    assert_eq!(result["id"], 2, "{result}");
    assert_eq!(result["error"]["code"], -32603, "{result}");
    assert!(
        statuses.iter().any(|s| s["status"] == "failed"),
        "the host was told: {statuses:?}"
    );
    // The relay still serves (its table was never poisoned by the huge ttl).
    let listed = relay.call(json!(3), "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["status"], "failed", "{listed}");
}

#[tokio::test]
async fn the_relay_keeps_a_task_at_most_task_ttl() {
    let upstream = Upstream::start(tasks_server()).await;
    let mut relay = Relay::start(&upstream.url, &["--task-ttl", "1"]).await;
    legacy_host(&mut relay).await;
    let started = std::time::Instant::now();
    let quick = relay
        .call(
            json!(1),
            "tools/call",
            json!({"name": "quick", "arguments": {}, "task": {}}),
        )
        .await;
    let id = quick["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let kept = relay
        .call(json!(2), "tasks/get", json!({"taskId": id}))
        .await;
    assert_eq!(kept["result"]["status"], "completed", "{kept}");
    let deadline = started + std::time::Duration::from_secs(10);
    let mut n = 3;
    loop {
        let got = relay
            .call(json!(n), "tasks/get", json!({"taskId": id}))
            .await;
        if got["error"]["code"] == -32602 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never forgotten: {got}"
        );
        n += 1;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "kept its whole ttl"
    );
}
