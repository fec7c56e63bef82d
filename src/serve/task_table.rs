//! The tasks serve keeps for 2026-07-28 clients whose calls a handshake-era child runs as
//! 2025-11-25 tasks: each under an opaque id of the gateway's (sealed around this
//! replica's name among replicas, like a `requestState`), bound to its principal and its
//! child, counted against the principal (`--max-tasks-per-principal`) and dropped when its
//! ttl is up.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::parking::Sealing;
use crate::serve::pool::Backend;

/// How a task's held `tasks/result` ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The child's `tasks/result` result (the tool's result).
    Result(Value),
    /// The child's `tasks/result` error (a JSON-RPC error object).
    Error(Value),
}

/// A question the child asked tied to the task, waiting for `tasks/update`.
#[derive(Debug, Clone)]
pub struct Question {
    /// The child's id for its request, byte for byte, for the answer.
    pub asker_raw_id: String,
    pub method: String,
    pub params: Value,
}

/// What changes as the task runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// The child's last word on the task (a 2025-11-25 `Task`).
    pub last: Option<Value>,
    /// Set once: the held `tasks/result` answered.
    pub outcome: Option<Outcome>,
    /// Pending questions by their key in `inputRequests`.
    pub questions: BTreeMap<String, Question>,
    /// Keys handed out so far (each question gets a fresh one).
    pub asked: u64,
    /// The client cancelled it.
    pub cancelled: bool,
    /// The client saw it end: it may be evicted first when its principal is full.
    pub delivered: bool,
    /// What the listens were last told (status and pending questions), so a change is
    /// told once.
    pub announced: Option<String>,
}

/// One task held for a client.
pub struct Task {
    /// The id the client holds.
    pub id: String,
    pub principal: Option<String>,
    /// The child's id for it.
    pub child_id: String,
    /// The pooled backend the child runs in (gone: the task is lost).
    pub backend: Weak<Backend>,
    /// When it is dropped.
    pub expires: Instant,
    /// Its ttl as the client is told it (`ttlMs`).
    pub ttl_ms: u64,
    /// `--max-task-questions`: the questions it may wait on at once.
    pub max_questions: usize,
    pub progress: Mutex<Progress>,
    /// Flips to true when the outcome is in.
    pub settled: watch::Sender<bool>,
    /// Fired when the task is dropped (expired, evicted, the gateway closing).
    pub dropped: CancellationToken,
}

impl Task {
    /// The backend, if its child still runs.
    pub fn live_backend(&self) -> Option<Arc<Backend>> {
        self.backend
            .upgrade()
            .filter(|b| !b.session.ended.is_cancelled())
    }

    /// Records how the held `tasks/result` ended and wakes whoever waits for it.
    pub fn settle(&self, outcome: Outcome) {
        let mut progress = self.progress.lock().expect("task lock");
        if progress.outcome.is_none() {
            progress.outcome = Some(outcome);
        }
        progress.questions.clear();
        drop(progress);
        self.settled.send_replace(true);
    }

    /// The outcome, waiting at most `wait` for it.
    pub async fn outcome_within(&self, wait: Duration) -> Option<Outcome> {
        let mut settled = self.settled.subscribe();
        let _ = tokio::time::timeout(wait, settled.wait_for(|s| *s)).await;
        self.progress.lock().expect("task lock").outcome.clone()
    }

    fn terminal(&self) -> bool {
        let progress = self.progress.lock().expect("task lock");
        progress.outcome.is_some() || progress.cancelled
    }
}

/// Why a task could not be created.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// The principal holds `--max-tasks-per-principal` tasks, none of them finished and read.
    Principal(usize),
}

/// What a new task is made of.
pub struct NewTask {
    pub principal: Option<String>,
    pub child_id: String,
    pub backend: Weak<Backend>,
    pub ttl: Duration,
}

pub struct Tasks {
    sealing: Option<Sealing>,
    max_per_principal: usize,
    max_questions: usize,
    tasks: Mutex<HashMap<String, Arc<Task>>>,
}

impl Tasks {
    pub fn new(max_per_principal: usize, max_questions: usize, sealing: Option<Sealing>) -> Self {
        Self {
            sealing,
            max_per_principal,
            max_questions,
            tasks: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `principal` may hold one more task (making room by dropping its oldest
    /// finished task whose end the client has seen). A check ahead of the call; the
    /// insertion checks again.
    pub fn room_for(&self, principal: Option<&str>) -> Result<(), Full> {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        self.make_room(&mut tasks, principal)
    }

    fn make_room(
        &self,
        tasks: &mut HashMap<String, Arc<Task>>,
        principal: Option<&str>,
    ) -> Result<(), Full> {
        sweep(tasks);
        let theirs: Vec<&Arc<Task>> = tasks
            .values()
            .filter(|t| t.principal.as_deref() == principal)
            .collect();
        if theirs.len() < self.max_per_principal {
            return Ok(());
        }
        let evictable = theirs
            .iter()
            .filter(|t| t.terminal() && t.progress.lock().expect("task lock").delivered)
            .min_by_key(|t| t.expires)
            .map(|t| t.id.clone());
        let Some(id) = evictable else {
            return Err(Full::Principal(self.max_per_principal));
        };
        if let Some(task) = tasks.remove(&id) {
            task.dropped.cancel();
        }
        Ok(())
    }

    /// Records a new task under a fresh id, if its principal has room (checked and taken
    /// under one lock, so concurrent calls cannot pass the bound together).
    pub fn insert(&self, new: NewTask) -> Result<Arc<Task>, Full> {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        self.make_room(&mut tasks, new.principal.as_deref())?;
        let id = self.mint();
        // A ttl past what a clock can add is as good as none: a long day stands for it.
        let expires = Instant::now()
            .checked_add(new.ttl)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        let task = Arc::new(Task {
            id: id.clone(),
            principal: new.principal,
            child_id: new.child_id,
            backend: new.backend,
            expires,
            ttl_ms: new.ttl.as_millis().try_into().unwrap_or(u64::MAX),
            max_questions: self.max_questions,
            progress: Mutex::new(Progress::default()),
            settled: watch::Sender::new(false),
            dropped: CancellationToken::new(),
        });
        tasks.insert(id, task.clone());
        Ok(task)
    }

    /// The task `id` if it is `principal`'s and not expired: any other principal's task,
    /// like one that never was, is unknown to the caller.
    pub fn get(&self, id: &str, principal: Option<&str>) -> Option<Arc<Task>> {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        sweep(&mut tasks);
        tasks
            .get(id)
            .filter(|t| t.principal.as_deref() == principal)
            .cloned()
    }

    /// Drops task `id` (its ttl is up, or its child forgot it).
    pub fn remove(&self, id: &str) {
        if let Some(task) = self.tasks.lock().expect("tasks lock").remove(id) {
            task.dropped.cancel();
        }
    }

    /// Drops every task (the gateway is closing).
    pub fn clear(&self) {
        for (_, task) in self.tasks.lock().expect("tasks lock").drain() {
            task.dropped.cancel();
        }
    }

    /// The replica a sealed task id names (`None`: not sealed by this cluster, or the
    /// table does not seal).
    pub fn owner(&self, id: &str) -> Option<String> {
        let sealing = self.sealing.as_ref()?;
        let plain = String::from_utf8(sealing.sealer.open(id)?).ok()?;
        plain.split_once('\n').map(|(owner, _)| owner.to_owned())
    }

    /// A fresh, unguessable id; among replicas sealed around this replica's name.
    fn mint(&self) -> String {
        let mut random = [0u8; 16];
        aws_lc_rs::rand::fill(&mut random).expect("the system random generator works");
        let inner: String = random.iter().map(|b| format!("{b:02x}")).collect();
        match &self.sealing {
            Some(sealing) => sealing
                .sealer
                .seal(format!("{}\n{inner}", sealing.owner).as_bytes()),
            None => format!("task-{inner}"),
        }
    }
}

/// Drops the tasks whose ttl is up.
fn sweep(tasks: &mut HashMap<String, Arc<Task>>) {
    let now = Instant::now();
    tasks.retain(|_, task| {
        let keep = task.expires > now;
        if !keep {
            task.dropped.cancel();
        }
        keep
    });
}

#[cfg(test)]
mod tests;
