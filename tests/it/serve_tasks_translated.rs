//! A 2026-07-28 client's tasks in front of a handshake-era child that runs tools as
//! 2025-11-25 tasks (the fixture's `FIXTURE_TASKS=1`): serve offers the extension, sends an
//! opted-in call to a task-capable tool with a `task` parameter, holds the child's task
//! under an id of its own, and answers `tasks/get`, `tasks/update` and `tasks/cancel` from
//! it across stateless requests; bounded per principal, dropped at its ttl.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::serve::*;
use crate::serve_tasks::{EXTENSION, error_code, opted_in};

async fn tasking(flags: &[&str], env: &[(&str, &str)]) -> Serve {
    let fixture = fixture();
    let mut env = env.to_vec();
    env.push(("FIXTURE_TASKS", "1"));
    Serve::start_with(flags, &[fixture.as_str()], &env).await
}

async fn call(serve: &Serve, id: u64, tool: &str, arguments: Value, opt_in: bool) -> Answer {
    let params = json!({"name": tool, "arguments": arguments});
    let params = if opt_in {
        opted_in(params)
    } else {
        crate::common::modern::enveloped(params)
    };
    serve
        .modern(json!(id), "tools/call", params, Some(tool))
        .await
}

async fn task_method(serve: &Serve, method: &str, params: Value) -> Answer {
    let task = params["taskId"].as_str().unwrap_or_default().to_owned();
    serve
        .modern(json!(90), method, opted_in(params), Some(&task))
        .await
}

/// The task's `tasks/get` once its status is one of `wanted` (10 s at most).
async fn until_status(serve: &Serve, task: &str, wanted: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = task_method(serve, "tasks/get", json!({"taskId": task})).await;
        let result = got.json()["result"].clone();
        if wanted.contains(&result["status"].as_str().unwrap_or_default()) {
            return result;
        }
        assert!(
            Instant::now() < deadline,
            "{task} never reached {wanted:?}: {}",
            got.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn created_task(answer: &Answer) -> String {
    let result = &answer.json()["result"];
    assert_eq!(result["resultType"], "task", "{}", answer.body);
    assert!(result.get("task").is_none(), "flat, not nested: {result}");
    result["taskId"].as_str().expect("a task id").to_owned()
}

#[tokio::test]
async fn an_opted_in_call_becomes_a_task_held_under_the_gateways_id_until_it_completes() {
    let serve = tasking(&[], &[]).await;
    let discover = serve
        .modern(json!(1), "server/discover", json!({}), None)
        .await;
    let capabilities = &discover.json()["result"]["capabilities"];
    assert_eq!(
        capabilities["extensions"][EXTENSION],
        json!({}),
        "{capabilities}"
    );
    assert!(
        capabilities.get("tasks").is_none(),
        "no 2025-11-25 capability: {capabilities}"
    );
    let created = call(
        &serve,
        2,
        "job",
        json!({"seconds": 0.3, "label": "a"}),
        true,
    )
    .await;
    let id = created_task(&created);
    let result = &created.json()["result"];
    assert!(
        id.starts_with("task-") && !id.contains("legacy"),
        "the gateway's own id: {id}"
    );
    assert_eq!(
        result["ttlMs"], 3_600_000,
        "--task-ttl's default, as the client is told it"
    );
    assert_eq!(
        result["pollIntervalMs"], 100,
        "the child's pollInterval, renamed"
    );
    assert!(
        result.get("ttl").is_none() && result.get("pollInterval").is_none(),
        "{result}"
    );
    let done = until_status(&serve, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["taskId"], id.as_str());
    assert_eq!(
        done["result"]["content"][0]["text"], "job done: a",
        "{done}"
    );
    assert!(
        done["result"].get("_meta").is_none(),
        "no related-task _meta: {done}"
    );
    assert_eq!(
        done["result"]["resultType"], "complete",
        "a 2026-07-28 CallToolResult"
    );
    // Kept after its end (for its ttl), and as often as asked.
    let again = until_status(&serve, &id, &["completed"]).await;
    assert_eq!(again["result"], done["result"]);
    // The same tool without the opt-in runs plainly; a tool that runs only as a task is
    // refused with the capability it needs.
    let plain = call(&serve, 3, "job", json!({"seconds": 0, "label": "b"}), false).await;
    assert_eq!(
        plain.json()["result"]["content"][0]["text"],
        "job done: b",
        "{}",
        plain.body
    );
    let required = call(&serve, 4, "confirm", json!({}), false).await;
    assert_eq!(
        error_code(&required),
        (400, Some(-32021)),
        "{}",
        required.body
    );
    assert_eq!(
        required.json()["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION],
        json!({})
    );
    // The methods 2026-07-28 removed, and ids that are not the caller's.
    let list = task_method(&serve, "tasks/list", json!({})).await;
    assert_eq!(error_code(&list), (404, Some(-32601)), "{}", list.body);
    let child_id = task_method(&serve, "tasks/get", json!({"taskId": "legacy-1"})).await;
    assert_eq!(
        error_code(&child_id),
        (200, Some(-32602)),
        "the child's id is not ours: {}",
        child_id.body
    );
}

#[tokio::test]
async fn a_tasks_question_is_asked_and_answered_across_stateless_requests() {
    let serve = tasking(&[], &[]).await;
    let created = call(&serve, 1, "confirm", json!({}), true).await;
    let id = created_task(&created);
    let asking = until_status(&serve, &id, &["input_required", "completed", "failed"]).await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    let requests = asking["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{asking}");
    let (key, question) = requests.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "confirm?");
    assert!(
        question["params"].get("_meta").is_none(),
        "no related-task _meta: {question}"
    );
    // A malformed answer to a pending question is refused and changes nothing.
    let malformed = task_method(
        &serve,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: "yes"}}),
    )
    .await;
    assert_eq!(
        error_code(&malformed),
        (200, Some(-32602)),
        "{}",
        malformed.body
    );
    let still = until_status(&serve, &id, &["input_required"]).await;
    assert_eq!(still["inputRequests"][key]["method"], "elicitation/create");
    let ack = task_method(
        &serve,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}, "stray": {}}}),
    )
    .await;
    assert_eq!(
        ack.json()["result"],
        json!({"resultType": "complete"}),
        "{}",
        ack.body
    );
    let done = until_status(&serve, &id, &["completed", "failed"]).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "confirmed: true",
        "{done}"
    );
    assert!(done.get("inputRequests").is_none(), "{done}");
}

#[tokio::test]
async fn cancelling_reaches_the_child_once_and_is_acknowledged_however_often() {
    let serve = tasking(&[], &[]).await;
    let created = call(&serve, 1, "job", json!({"seconds": 30}), true).await;
    let id = created_task(&created);
    let ack = task_method(&serve, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(
        ack.json()["result"],
        json!({"resultType": "complete"}),
        "{}",
        ack.body
    );
    serve.wait_stderr("fixture: tasks/cancel legacy-").await;
    let cancelled = until_status(&serve, &id, &["cancelled", "completed", "failed"]).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(
        cancelled.get("result").is_none() && cancelled.get("error").is_none(),
        "{cancelled}"
    );
    let again = task_method(&serve, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(
        again.json()["result"],
        json!({"resultType": "complete"}),
        "{}",
        again.body
    );
    assert_eq!(
        serve.stderr().matches("fixture: tasks/cancel").count(),
        1,
        "told once"
    );
    // A cancel racing the task's end: acknowledged, and the task ends one way or the other.
    let quick = created_task(&call(&serve, 2, "job", json!({"seconds": 0}), true).await);
    let raced = task_method(&serve, "tasks/cancel", json!({"taskId": quick})).await;
    assert_eq!(
        raced.json()["result"],
        json!({"resultType": "complete"}),
        "{}",
        raced.body
    );
    let ended = until_status(&serve, &quick, &["cancelled", "completed"]).await;
    assert!(ended.get("error").is_none(), "{ended}");
    // A protocol error ends the task failed, with the error inlined and no result.
    let broken = created_task(&call(&serve, 3, "broken-job", json!({}), true).await);
    let failed = until_status(&serve, &broken, &["failed", "completed"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], -32000);
    assert_eq!(failed["error"]["message"], "the job broke");
    assert!(failed.get("result").is_none(), "{failed}");
}

#[tokio::test]
async fn a_task_is_dropped_at_its_ttl_and_the_shorter_ttl_wins() {
    let serve = tasking(&["--task-ttl", "1"], &[("FIXTURE_TASK_TTL_MS", "600")]).await;
    let created = call(&serve, 1, "job", json!({"seconds": 0}), true).await;
    let id = created_task(&created);
    assert_eq!(
        created.json()["result"]["ttlMs"],
        600,
        "the child granted less than --task-ttl"
    );
    let done = until_status(&serve, &id, &["completed"]).await;
    assert_eq!(done["ttlMs"], 600);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = task_method(&serve, "tasks/get", json!({"taskId": id})).await;
        if error_code(&got).1 == Some(-32602) {
            break;
        }
        assert_eq!(got.json()["result"]["status"], "completed", "{}", got.body);
        assert!(Instant::now() < deadline, "never dropped: {}", got.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_principal_holds_at_most_max_tasks_per_principal() {
    let serve = tasking(&["--max-tasks-per-principal", "2"], &[]).await;
    let first = created_task(&call(&serve, 1, "job", json!({"seconds": 30}), true).await);
    let _second = created_task(&call(&serve, 2, "job", json!({"seconds": 30}), true).await);
    let third = call(&serve, 3, "job", json!({"seconds": 30}), true).await;
    assert_eq!(third.status, 429, "{}", third.body);
    let message = third.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("--max-tasks-per-principal (2)"),
        "{message}"
    );
    // Without the opt-in the call is not a task, and runs.
    let plain = call(
        &serve,
        4,
        "job",
        json!({"seconds": 0, "label": "plain"}),
        false,
    )
    .await;
    assert_eq!(
        plain.json()["result"]["content"][0]["text"],
        "job done: plain",
        "{}",
        plain.body
    );
    // A cancelled task whose end the client has read makes room.
    task_method(&serve, "tasks/cancel", json!({"taskId": first})).await;
    until_status(&serve, &first, &["cancelled"]).await;
    let fourth = call(&serve, 5, "job", json!({"seconds": 0}), true).await;
    created_task(&fourth);
    let gone = task_method(&serve, "tasks/get", json!({"taskId": first})).await;
    assert_eq!(
        error_code(&gone).1,
        Some(-32602),
        "the read task was dropped: {}",
        gone.body
    );
}

#[tokio::test]
async fn a_listen_naming_its_tasks_hears_their_status_changes() {
    let serve = tasking(&[], &[]).await;
    let id = created_task(&call(&serve, 1, "confirm", json!({}), true).await);
    let asked = opted_in(json!({"notifications": {"taskIds": [id, "task-not-yours"]}}));
    let response = serve
        .open_modern(json!("l-1"), "subscriptions/listen", asked)
        .await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s| s.contains("acknowledged")).await;
    assert_eq!(
        sse_data(&seen)[0]["params"]["notifications"],
        json!({"taskIds": [id]}),
        "only the caller's own tasks are followed"
    );
    let asking = until_status(&serve, &id, &["input_required"]).await;
    let key = asking["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    task_method(
        &serve,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"confirm": false}}}}),
    )
    .await;
    read_until(&mut body, &mut seen, |s| s.contains("\"completed\"")).await;
    // The child announces the end before its result reaches the gateway: the listen hears
    // of the end once, with the result, and never a false end before it.
    let told: Vec<Value> = sse_data(&seen)
        .into_iter()
        .filter(|e| e["method"] == "notifications/tasks")
        .collect();
    let ends: Vec<&Value> = told
        .iter()
        .filter(|e| {
            ["completed", "failed", "cancelled"]
                .contains(&e["params"]["status"].as_str().unwrap_or_default())
        })
        .collect();
    assert_eq!(ends.len(), 1, "{told:?}");
    let done = ends[0];
    assert_eq!(done["method"], "notifications/tasks");
    assert_eq!(done["params"]["taskId"], id.as_str());
    assert_eq!(
        done["params"]["result"]["content"][0]["text"], "confirmed: false",
        "{done}"
    );
    assert_eq!(
        done["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l-1"
    );
}

#[tokio::test]
async fn a_task_waits_on_at_most_max_task_questions_and_more_are_refused_to_the_child() {
    let serve = tasking(&["--max-task-questions", "2"], &[]).await;
    let id = created_task(&call(&serve, 1, "ask-many", json!({"count": 3}), true).await);
    // The third question is refused to the child as it comes; two are shown.
    serve
        .wait_stderr("fixture: a task's question was refused")
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let asking = loop {
        let got = until_status(&serve, &id, &["input_required", "completed"]).await;
        if got["inputRequests"]
            .as_object()
            .is_some_and(|r| r.len() == 2)
        {
            break got;
        }
        assert!(Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let answers: serde_json::Map<String, Value> = asking["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .map(|key| (key.clone(), json!({"action": "accept", "content": {}})))
        .collect();
    task_method(
        &serve,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answers}),
    )
    .await;
    let done = until_status(&serve, &id, &["completed", "failed"]).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "answered: 2 of 3",
        "{done}"
    );
}
