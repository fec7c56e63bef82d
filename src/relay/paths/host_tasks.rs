//! 2025-11-25 tasks for a legacy host in front of a 2026-07-28 server that speaks the tasks
//! extension. A task-augmented `tools/call` goes up opted in (its `task` parameter removed)
//! and the flat `CreateTaskResult` comes back nested. The relay then follows each task
//! (polling `tasks/get`): it puts the task's `inputRequests` to the host as real requests
//! tied to the task and answers them with `tasks/update`, tells the host of status changes
//! (`notifications/tasks/status`), and keeps the end. So it can answer what 2026-07-28
//! removed: `tasks/result` (waiting for the end) and `tasks/list` (the tasks it holds).
//! `tasks/get` and `tasks/cancel` go to the server, translated.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::host_profile::HostProfile;
use super::own_request::own_request;
use crate::era::tasks::{create_result_to_legacy, is_terminal, task_to_legacy, tied_to};
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_PARAMS, error_response};
use crate::relay::context::Ctx;
use crate::relay::request::Call;

/// How a task ended, as `tasks/result` gives it: the result, or the error.
type Outcome = Result<Value, Value>;

/// One task the host holds.
struct Followed {
    /// The latest 2025-11-25 `Task` (the relay's view of the server's).
    task: Value,
    outcome: Option<Outcome>,
    /// Flips to true when the outcome is in.
    ended: watch::Sender<bool>,
    expires: Instant,
    /// The host read its end: it may make room for a new task.
    delivered: bool,
}

/// The tasks a legacy host holds on the server, and what following them needs.
pub struct HostTasks {
    ctx: Arc<Ctx>,
    /// The host's envelope, opted in to the extension on every request about a task.
    profile: Arc<HostProfile>,
    tasks: Mutex<HashMap<String, Followed>>,
}

/// Failed polls in a row after which a task is given up.
const MOST_FAILED_POLLS: u32 = 10;

/// The polling interval when the server gives none, and the bounds on one it gives.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
const FASTEST_POLL: Duration = Duration::from_millis(50);
const SLOWEST_POLL: Duration = Duration::from_secs(5);

impl HostTasks {
    pub fn new(ctx: Arc<Ctx>, profile: Arc<HostProfile>) -> Arc<Self> {
        Arc::new(Self {
            ctx,
            profile,
            tasks: Mutex::new(HashMap::new()),
        })
    }

    fn sweep(tasks: &mut HashMap<String, Followed>) {
        let now = Instant::now();
        tasks.retain(|_, t| t.expires > now);
    }

    /// Whether the host may hold one more task (making room by dropping the oldest ended
    /// task whose end the host has read).
    pub fn has_room(&self, max: usize) -> bool {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        Self::sweep(&mut tasks);
        if tasks.len() < max {
            return true;
        }
        let read = tasks
            .iter()
            .filter(|(_, t)| t.delivered && t.outcome.is_some())
            .min_by_key(|(_, t)| t.expires)
            .map(|(id, _)| id.clone());
        read.is_some_and(|id| tasks.remove(&id).is_some())
    }

    /// The host read the task's end.
    fn delivered(&self, id: &str) {
        if let Some(task) = self.tasks.lock().expect("tasks lock").get_mut(id)
            && task.outcome.is_some()
        {
            task.delivered = true;
        }
    }

    fn snapshot(&self, id: &str) -> Option<(Value, Option<Outcome>, watch::Receiver<bool>)> {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        Self::sweep(&mut tasks);
        tasks
            .get(id)
            .map(|t| (t.task.clone(), t.outcome.clone(), t.ended.subscribe()))
    }
}

/// The answer to a task-augmented call the server answered with `result` (flat, a
/// `CreateTaskResult`, or a plain result when the server chose to answer at once): the
/// nested 2025-11-25 `CreateTaskResult` for the host, the task followed from now on.
pub fn created(path: &Arc<HostTasks>, version: &str, result: &Value) -> Value {
    let (task, outcome) = match create_result_to_legacy(result) {
        Some(created) => (created["task"].clone(), None),
        // Answered at once: a task that has already completed, so the host reads the
        // result the way it asked to.
        None => {
            let id = path.ctx.next_upstream_id("task");
            let now = rfc3339_now();
            let task = json!({"taskId": id, "status": "completed", "ttl": null,
                              "createdAt": now, "lastUpdatedAt": now});
            (task, Some(Ok(result.clone())))
        }
    };
    let id = task["taskId"].as_str().unwrap_or_default().to_owned();
    // The server's ttl, at most --task-ttl (which also stands for "unlimited"): the relay
    // keeps what it holds no longer, and a "forever" ttl such as 2^53 ms cannot overflow
    // the clock.
    let longest = path.ctx.config.task_ttl;
    let ttl = task["ttl"]
        .as_u64()
        .map_or(longest, Duration::from_millis)
        .min(longest);
    let expires = Instant::now() + ttl;
    let (ended, _) = watch::channel(outcome.is_some());
    let finished = outcome.is_some();
    let followed = Followed {
        task: task.clone(),
        outcome,
        ended,
        expires,
        delivered: false,
    };
    path.tasks
        .lock()
        .expect("tasks lock")
        .insert(id.clone(), followed);
    if !finished {
        let (path, version) = (path.clone(), version.to_owned());
        tokio::spawn(async move { follow(&path, &version, &id).await });
    }
    json!({ "task": task })
}

/// The time now as RFC 3339, for a task the relay makes itself.
fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Serves a host's `tasks/*` request.
pub async fn serve(path: &Arc<HostTasks>, request: &Call, version: &str) {
    let params: Map<String, Value> = request
        .params
        .as_deref()
        .and_then(|p| serde_json::from_slice(p).ok())
        .unwrap_or_default();
    let id = params
        .get("taskId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let line = match request.method.as_str() {
        "tasks/list" => Ok(list(path)),
        "tasks/result" => result(path, &request.raw_id, id).await,
        "tasks/cancel" => cancel(path, version, id).await,
        _ => get(path, version, id).await,
    };
    let line = match line {
        Ok(result) => format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
            request.raw_id
        )
        .into_bytes(),
        Err(line) => line.replace_id(&request.raw_id),
    };
    path.ctx.gate.deliver(&request.id, line).await;
}

/// An error answer, its id filled in at the end.
struct ErrorLine(i64, String, Option<Value>);

impl ErrorLine {
    fn replace_id(self, raw_id: &str) -> Vec<u8> {
        error_response(raw_id, self.0, &self.1, self.2)
    }
}

fn unknown(id: &str) -> ErrorLine {
    ErrorLine(INVALID_PARAMS, format!("Task not found: {id:?}"), None)
}

fn list(path: &HostTasks) -> Value {
    let mut tasks = path.tasks.lock().expect("tasks lock");
    HostTasks::sweep(&mut tasks);
    let listed: Vec<Value> = tasks.values().map(|t| t.task.clone()).collect();
    json!({ "tasks": listed })
}

/// `tasks/result`: waits for the task's end (as long as the task lives).
async fn result(path: &HostTasks, _raw_id: &str, id: &str) -> Result<Value, ErrorLine> {
    let Some((_, outcome, mut ended)) = path.snapshot(id) else {
        return Err(unknown(id));
    };
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => {
            let _ = ended.wait_for(|e| *e).await;
            let Some((_, Some(outcome), _)) = path.snapshot(id) else {
                return Err(unknown(id));
            };
            outcome
        }
    };
    path.delivered(id);
    match outcome {
        Ok(result) => Ok(tied_to(&result, id)),
        Err(error) => Err(ErrorLine(
            error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
            error["message"]
                .as_str()
                .unwrap_or("the task failed")
                .to_owned(),
            error.get("data").cloned(),
        )),
    }
}

/// `tasks/get`: the server's, as a 2025-11-25 `Task`; an ended task's as the relay holds it.
async fn get(path: &HostTasks, version: &str, id: &str) -> Result<Value, ErrorLine> {
    let Some((task, outcome, _)) = path.snapshot(id) else {
        return Err(unknown(id));
    };
    if outcome.is_some() {
        // Ended (or made by the relay for a call answered at once): nothing more to ask.
        path.delivered(id);
        return Ok(task);
    }
    let got = match ask_server(path, version, "tasks/get", json!({"taskId": id})).await {
        Ok(detailed) => Ok(record(path, id, &detailed)),
        // The relay made it, or the server forgot it: what the relay holds.
        Err(_) => path
            .snapshot(id)
            .map(|(task, _, _)| task)
            .ok_or_else(|| unknown(id)),
    };
    if got
        .as_ref()
        .is_ok_and(|task| is_terminal(task["status"].as_str().unwrap_or_default()))
    {
        path.delivered(id);
    }
    got
}

/// `tasks/cancel`: a task already ended cannot be (as in 2025-11-25); otherwise the server
/// is told, and the host gets the task as it now is.
async fn cancel(path: &HostTasks, version: &str, id: &str) -> Result<Value, ErrorLine> {
    let Some((task, _, _)) = path.snapshot(id) else {
        return Err(unknown(id));
    };
    let status = task["status"].as_str().unwrap_or_default();
    if is_terminal(status) {
        return Err(ErrorLine(
            INVALID_PARAMS,
            format!("Cannot cancel task in terminal status: {status}"),
            None,
        ));
    }
    ask_server(path, version, "tasks/cancel", json!({"taskId": id}))
        .await
        .map_err(|(_, why)| ErrorLine(INTERNAL_ERROR, why, None))?;
    let now = ask_server(path, version, "tasks/get", json!({"taskId": id})).await;
    let mut task = match now {
        Ok(detailed) => record(path, id, &detailed),
        Err(_) => task,
    };
    if !is_terminal(task["status"].as_str().unwrap_or_default()) {
        // The server ends it in its own time; the host asked for it to end.
        task["status"] = json!("cancelled");
    }
    Ok(task)
}

/// Keeps the server's latest word on the task (a 2026-07-28 `tasks/get` answer) and, when
/// it ended, its outcome; returns it as a 2025-11-25 `Task`.
fn record(path: &HostTasks, id: &str, detailed: &Value) -> Value {
    let task = task_to_legacy(detailed);
    let status = task["status"].as_str().unwrap_or_default().to_owned();
    let mut tasks = path.tasks.lock().expect("tasks lock");
    if let Some(followed) = tasks.get_mut(id) {
        followed.task = task.clone();
        if is_terminal(&status) && followed.outcome.is_none() {
            followed.outcome = Some(match status.as_str() {
                "completed" => Ok(detailed
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| json!({"content": []}))),
                "failed" => Err(detailed.get("error").cloned().unwrap_or_else(
                    || json!({"code": INTERNAL_ERROR, "message": "the task failed"}),
                )),
                _ => Err(json!({"code": INTERNAL_ERROR, "message": "the task was cancelled"})),
            });
            followed.ended.send_replace(true);
        }
    }
    task
}

/// Why the server gave no result: its error's code (none when there was no answer) and
/// what was wrong.
type Refusal = (Option<i64>, String);

/// A request of the relay's own about a task, opted in; its result, or why there is none.
async fn ask_server(
    path: &HostTasks,
    version: &str,
    method: &str,
    params: Value,
) -> Result<Value, Refusal> {
    let Value::Object(mut params) = params else {
        unreachable!("an object")
    };
    crate::era::envelope::stamp(&mut params, &path.profile.opted_in_stamp(version));
    let line = own_request(&path.ctx, version, method, &params)
        .await
        .map_err(|failure| (None, failure.message))?;
    let answer: Value = serde_json::from_slice(&line)
        .map_err(|_| (None, "the server's answer is not JSON".to_owned()))?;
    match answer.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err((
            answer["error"]["code"].as_i64(),
            answer["error"]["message"]
                .as_str()
                .unwrap_or("the server refused")
                .to_owned(),
        )),
    }
}

/// Follows a task until it ends: polls `tasks/get`, asks the host what the task asks,
/// tells it of status changes (the end too, whoever saw it first). A task the server no
/// longer knows (-32602), or that cannot be polled `MOST_FAILED_POLLS` times in a row,
/// fails.
async fn follow(path: &Arc<HostTasks>, version: &str, id: &str) {
    let mut asked: HashSet<String> = HashSet::new();
    let mut last_status = String::new();
    let mut poll = DEFAULT_POLL;
    let mut failed_polls = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = path.ctx.closing.cancelled() => return,
        }
        let Some((task, outcome, _)) = path.snapshot(id) else {
            return;
        };
        if outcome.is_some() {
            // The host's own tasks/get saw the end first: it is told all the same.
            if task["status"] != last_status.as_str() {
                notify_status(path, &task).await;
            }
            return;
        }
        let detailed = match ask_server(path, version, "tasks/get", json!({"taskId": id})).await {
            Ok(detailed) => detailed,
            Err((code, why)) => {
                failed_polls += 1;
                tracing::debug!(task = %id, "tasks/get failed while following the task: {why}");
                if code == Some(INVALID_PARAMS) || failed_polls >= MOST_FAILED_POLLS {
                    give_up(path, id, &why).await;
                    return;
                }
                continue;
            }
        };
        failed_polls = 0;
        if let Some(ms) = detailed["pollIntervalMs"].as_u64() {
            poll = Duration::from_millis(ms).clamp(FASTEST_POLL, SLOWEST_POLL);
        }
        let task = record(path, id, &detailed);
        let status = task["status"].as_str().unwrap_or_default().to_owned();
        if status != last_status {
            last_status.clone_from(&status);
            notify_status(path, &task).await;
        }
        if is_terminal(&status) {
            return;
        }
        let requests = detailed["inputRequests"].as_object();
        // A key the server reuses in a later round is a new question.
        asked.retain(|key| requests.is_some_and(|r| r.contains_key(key)));
        for (key, request) in requests.into_iter().flatten() {
            if asked.insert(key.clone()) {
                let (path, version, id, key, request) = (
                    path.clone(),
                    version.to_owned(),
                    id.to_owned(),
                    key.clone(),
                    request.clone(),
                );
                tokio::spawn(async move { ask_host(&path, &version, &id, &key, &request).await });
            }
        }
    }
}

/// Ends a task the relay can no longer follow: failed, the host told first (so a
/// `tasks/result` waiting for it answers after the notification).
async fn give_up(path: &HostTasks, id: &str, why: &str) {
    let Some((mut task, _, _)) = path.snapshot(id) else {
        return;
    };
    task["status"] = json!("failed");
    task["statusMessage"] = json!(why);
    notify_status(path, &task).await;
    let mut tasks = path.tasks.lock().expect("tasks lock");
    if let Some(followed) = tasks.get_mut(id) {
        followed.task = task;
        followed.outcome = Some(Err(json!({"code": INTERNAL_ERROR,
            "message": format!("the server can no longer say how the task is: {why}")})));
        followed.ended.send_replace(true);
    }
}

/// Tells the host a task's status changed.
async fn notify_status(path: &HostTasks, task: &Value) {
    let line = json!({"jsonrpc": "2.0", "method": crate::era::tasks::LEGACY_STATUS_NOTIFICATION, "params": task});
    path.ctx
        .gate
        .outbox()
        .send(line.to_string().into_bytes())
        .await;
}

/// Puts one of the task's questions to the host, tied to the task, and answers the server
/// with the host's answer.
async fn ask_host(path: &HostTasks, version: &str, id: &str, key: &str, request: &Value) {
    let method = request["method"].as_str().unwrap_or_default();
    let params = tied_to(&request["params"], id);
    let timeout = path.ctx.config.input_timeout;
    let answer = path
        .ctx
        .host_requests
        .ask(path.ctx.gate.outbox(), method, &params, timeout)
        .await;
    let response = match answer {
        Ok(result) => result,
        Err(why) => {
            // A question the host would not answer: declined, so the task can go on.
            tracing::info!(task = %id, "the host did not answer the task's {method}: {why}");
            json!({"action": "decline"})
        }
    };
    let update = json!({"taskId": id, "inputResponses": {key: response}});
    if let Err((_, why)) = ask_server(path, version, "tasks/update", update).await {
        tracing::info!(task = %id, "the server refused the host's answer to the task's {method}: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_line_takes_the_requests_id() {
        let line = ErrorLine(INVALID_PARAMS, "Task not found".into(), None).replace_id("7");
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["id"], 7);
        assert_eq!(value["error"]["code"], INVALID_PARAMS);
    }
}
