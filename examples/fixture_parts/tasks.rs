//! `FIXTURE_TASKS=1`: tasks in the fixture's own era. Handshake era: a small 2025-11-25 task
//! server (the `tasks` capability, tools with `execution.taskSupport`, `tasks/get`,
//! `tasks/result` waiting for the end, `tasks/list`, `tasks/cancel`, and a question tied to
//! its task asked only once a `tasks/result` for it is open, as the TypeScript SDK does).
//! `FIXTURE_TASK_TTL_MS` caps the ttl it grants. `FIXTURE_ERA=modern`: the 2026-07-28
//! extension in `server/discover`, and `tasks/get` knowing one task, `t-known` (any other
//! id is `-32602`), for a gateway that passes the extension through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub fn on() -> bool {
    std::env::var("FIXTURE_TASKS").as_deref() == Ok("1")
}

/// `capabilities` with 2025-11-25's tasks entry added when tasks are on.
pub fn legacy_capabilities(mut capabilities: Value) -> Value {
    if on() {
        capabilities["tasks"] =
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    capabilities
}

/// The task tools, when tasks are on: `job` (optional; `{seconds, label}`, ends with
/// "job done: LABEL"), `confirm` (required; asks `elicitation/create`, ends with what was
/// answered), `broken-job` (optional; ends with a JSON-RPC error) and `ask-many`
/// (required; asks `{count}` questions at once, ends with how many were answered).
pub fn tools() -> Vec<Value> {
    if !on() {
        return Vec::new();
    }
    let tool = |name: &str, support: &str| {
        json!({"name": name, "inputSchema": {"type": "object"},
               "execution": {"taskSupport": support}})
    };
    vec![
        tool("job", "optional"),
        tool("confirm", "required"),
        tool("broken-job", "optional"),
        tool("ask-many", "required"),
    ]
}

/// The 2026-07-28 capabilities, with the extension when tasks are on.
pub fn modern_capabilities() -> Value {
    if on() {
        json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({"tools": {}})
    }
}

/// A 2026-07-28 `tasks/get` answer: the result, or the error, for `params`.
pub fn get(params: &Value) -> Result<Value, Value> {
    if params["taskId"] != "t-known" {
        return Err(json!({"code": -32602, "message": "Invalid params: unknown task"}));
    }
    Ok(
        json!({"resultType": "complete", "taskId": "t-known", "status": "working",
              "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:00Z",
              "ttlMs": null, "pollIntervalMs": 500}),
    )
}

/// One task of the handshake-era server.
struct Task {
    status: &'static str,
    ttl: u64,
    outcome: Option<Result<Value, Value>>,
    /// A `tasks/result` for it is open: its question may be asked.
    result_open: bool,
}

/// Sends a request to the client and waits for its answer.
pub type Ask = Box<dyn Fn(&str, Value) -> Value + Send + Sync>;

static TASKS: LazyLock<(Mutex<HashMap<String, Task>>, Condvar)> = LazyLock::new(Default::default);
static NEXT: AtomicU64 = AtomicU64::new(0);

fn view(id: &str, task: &Task) -> Value {
    json!({"taskId": id, "status": task.status, "ttl": task.ttl, "pollInterval": 100,
           "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:01Z"})
}

fn unknown(id: &Value) -> Value {
    json!({"code": -32602, "message": format!("Task not found: {id}")})
}

fn set(id: &str, change: impl FnOnce(&mut Task)) {
    let (tasks, changed) = &*TASKS;
    if let Some(task) = tasks.lock().unwrap().get_mut(id)
        && !matches!(task.status, "completed" | "failed" | "cancelled")
    {
        change(task);
    }
    changed.notify_all();
}

/// Where the fixture's notifications go (its stdout), set by `main`.
static NOTIFY: std::sync::OnceLock<Box<dyn Fn(Value) + Send + Sync>> = std::sync::OnceLock::new();

pub fn set_notifier(notify: Box<dyn Fn(Value) + Send + Sync>) {
    let _ = NOTIFY.set(notify);
}

fn end(id: &str, status: &'static str, outcome: Result<Value, Value>) {
    // Like the TypeScript SDK's `storeTaskResult`: the status notification goes out before
    // `tasks/result` can give the result.
    if let Some(notify) = NOTIFY.get() {
        notify(
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
            "params": {"taskId": id, "status": status, "ttl": 60000,
                       "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:02Z"}}),
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    set(id, |task| {
        task.status = status;
        task.outcome = Some(outcome);
    });
}

/// The handshake-era task methods and task-creating calls, when tasks are on; `None` for
/// anything else. `ask` sends a request to the client and waits for its answer.
pub fn legacy(method: &str, params: &Value, ask: Ask) -> Option<Result<Value, Value>> {
    if !on() || std::env::var("FIXTURE_ERA").as_deref() == Ok("modern") {
        return None;
    }
    let (tasks, changed) = &*TASKS;
    let id = &params["taskId"];
    let key = id.as_str().unwrap_or_default().to_owned();
    match method {
        "tools/call" if params.get("task").is_some() => Some(Ok(create(params, ask))),
        // Called plainly: `job` runs to its end, `confirm` cannot (it runs only as a task).
        "tools/call" if params["name"] == "job" => {
            let seconds = params["arguments"]["seconds"].as_f64().unwrap_or(0.2);
            std::thread::sleep(Duration::from_secs_f64(seconds));
            let label = params["arguments"]["label"].as_str().unwrap_or("job");
            Some(Ok(
                json!({"content": [{"type": "text", "text": format!("job done: {label}")}]}),
            ))
        }
        "tools/call" if params["name"] == "confirm" => Some(Err(
            json!({"code": -32601, "message": "confirm runs only as a task"}),
        )),
        "tasks/get" => Some(
            tasks
                .lock()
                .unwrap()
                .get(&key)
                .map(|t| view(&key, t))
                .ok_or_else(|| unknown(id)),
        ),
        "tasks/list" => Some(Ok(
            json!({"tasks": tasks.lock().unwrap().iter().map(|(k, t)| view(k, t)).collect::<Vec<_>>()}),
        )),
        "tasks/cancel" => {
            eprintln!("fixture: tasks/cancel {key}");
            let mut all = tasks.lock().unwrap();
            let Some(task) = all.get_mut(&key) else {
                return Some(Err(unknown(id)));
            };
            if matches!(task.status, "completed" | "failed" | "cancelled") {
                return Some(Err(
                    json!({"code": -32602, "message": format!("Cannot cancel task in terminal status: {}", task.status)}),
                ));
            }
            task.status = "cancelled";
            task.outcome = Some(Err(
                json!({"code": -32603, "message": "Task was cancelled"}),
            ));
            let answer = view(&key, task);
            changed.notify_all();
            Some(Ok(answer))
        }
        "tasks/result" => {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut all = tasks.lock().unwrap();
            let Some(task) = all.get_mut(&key) else {
                return Some(Err(unknown(id)));
            };
            task.result_open = true;
            changed.notify_all();
            while all.get(&key).is_some_and(|t| t.outcome.is_none()) && Instant::now() < deadline {
                all = changed
                    .wait_timeout(all, Duration::from_millis(50))
                    .unwrap()
                    .0;
            }
            let outcome = all.get(&key).and_then(|t| t.outcome.clone());
            Some(
                outcome
                    .map(|o| {
                        o.map(|mut result| {
                            result["_meta"] =
                                json!({"io.modelcontextprotocol/related-task": {"taskId": key}});
                            result
                        })
                    })
                    .unwrap_or_else(|| {
                        Err(json!({"code": -32603, "message": "no result in time"}))
                    }),
            )
        }
        _ => None,
    }
}

/// Creates the task for a `tools/call` with a `task` parameter and runs it on a thread.
fn create(params: &Value, ask: Ask) -> Value {
    let id = format!("legacy-{}", NEXT.fetch_add(1, Ordering::Relaxed) + 1);
    let cap = std::env::var("FIXTURE_TASK_TTL_MS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(u64::MAX);
    let ttl = params["task"]["ttl"].as_u64().unwrap_or(60_000).min(cap);
    let task = Task {
        status: "working",
        ttl,
        outcome: None,
        result_open: false,
    };
    let created = view(&id, &task);
    TASKS.0.lock().unwrap().insert(id.clone(), task);
    let (name, arguments) = (
        params["name"].as_str().unwrap_or_default().to_owned(),
        params["arguments"].clone(),
    );
    let running = id.clone();
    std::thread::spawn(move || run(&running, &name, &arguments, ask));
    json!({"task": created})
}

/// Like the TypeScript SDK: a task's questions wait for a `tasks/result` to carry them.
fn wait_for_result_open(id: &str) {
    let (tasks, changed) = &*TASKS;
    let mut all = tasks.lock().unwrap();
    while all
        .get(id)
        .is_some_and(|t| !t.result_open && t.outcome.is_none())
    {
        all = changed
            .wait_timeout(all, Duration::from_millis(50))
            .unwrap()
            .0;
    }
}

fn run(id: &str, name: &str, arguments: &Value, ask: Ask) {
    let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
    match name {
        "confirm" => {
            wait_for_result_open(id);
            set(id, |task| task.status = "input_required");
            let answer = ask(
                "elicitation/create",
                json!({"message": "confirm?",
                "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}}}),
            );
            set(id, |task| task.status = "working");
            let said = answer["result"]["content"]["confirm"].to_string();
            end(id, "completed", Ok(text(format!("confirmed: {said}"))));
        }
        // `{count}` questions at once, tied to the task; ends saying how many were answered.
        "ask-many" => {
            wait_for_result_open(id);
            set(id, |task| task.status = "input_required");
            let count = arguments["count"].as_u64().unwrap_or(2);
            let ask = std::sync::Arc::new(ask);
            let asks: Vec<_> = (0..count)
                .map(|n| {
                    let (ask, id) = (ask.clone(), id.to_owned());
                    std::thread::spawn(move || {
                        let answer = ask(
                            "elicitation/create",
                            json!({"message": format!("question {n}"),
                            "requestedSchema": {"type": "object", "properties": {}},
                            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}}}),
                        );
                        if answer.get("error").is_some() {
                            eprintln!("fixture: a task's question was refused");
                        }
                        answer.get("result").is_some()
                    })
                })
                .collect();
            let answered = asks
                .into_iter()
                .map(|a| a.join().unwrap_or(false))
                .filter(|answered| *answered)
                .count();
            set(id, |task| task.status = "working");
            end(
                id,
                "completed",
                Ok(text(format!("answered: {answered} of {count}"))),
            );
        }
        "broken-job" => end(
            id,
            "failed",
            Err(json!({"code": -32000, "message": "the job broke"})),
        ),
        _ => {
            let seconds = arguments["seconds"].as_f64().unwrap_or(0.2);
            std::thread::sleep(Duration::from_secs_f64(seconds));
            let label = arguments["label"].as_str().unwrap_or("job");
            end(id, "completed", Ok(text(format!("job done: {label}"))));
        }
    }
}
