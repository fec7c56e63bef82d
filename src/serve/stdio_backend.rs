//! The stdio child as a backend: requests go to its stdin; its output is routed as it
//! comes. An answer goes to the request that asked; a request's own notifications (its
//! progress, its listen's events) to that request's stream; a question or log line to the
//! one request in progress when there is exactly one; the rest to the session's server
//! events. A pooled child serves many clients at once: its questions go to a call only
//! when no other call could be the one asked, and its change notifications to listens.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::backend::{Backend, Conflict, Event, Undeliverable, progress_key, send_all};
use super::child::Output;
use super::server_events::ServerEvents;
use crate::jsonrpc::message::{self, IdKey, Kind, Message};

struct Pending {
    /// The request's bytes: a reused id with other bytes is a conflict.
    body: Bytes,
    /// Everyone waiting (a client that re-sends the same request while it runs waits too).
    waiters: Vec<mpsc::Sender<Event>>,
    /// `params._meta.progressToken`, as `progress_key` makes it.
    progress: Option<String>,
    /// The child asked this call something and waits for the answer: it cannot be the
    /// one asking anything else.
    asking: bool,
    /// The child's task this request stands for (the gateway's held `tasks/result`).
    task: Option<String>,
}

pub struct StdioBackend {
    /// The session's id as logs show it.
    name: String,
    stdin: mpsc::Sender<Bytes>,
    pending: Mutex<HashMap<IdKey, Pending>>,
    /// `--max-requests-per-session`.
    max_pending: usize,
    /// Shared by a principal's 2026-07-28 calls (the pool's child), not one client's.
    shared: bool,
    events: Arc<ServerEvents>,
    /// What the child said tied to a task nobody holds yet.
    orphans: super::orphans::Orphans,
    /// Lines from the child that were not JSON-RPC or were too long, so the log can say so
    /// without a line of its own for each (a server that prints its debug output to stdout
    /// would flood it).
    skipped_lines: AtomicU64,
}

impl StdioBackend {
    pub fn new(
        name: String,
        stdin: mpsc::Sender<Bytes>,
        max_pending: usize,
        shared: bool,
        events: Arc<ServerEvents>,
    ) -> Self {
        StdioBackend {
            name,
            stdin,
            pending: Mutex::new(HashMap::new()),
            max_pending,
            shared,
            events,
            orphans: Default::default(),
            skipped_lines: AtomicU64::new(0),
        }
    }

    /// Routes one line of the child's output.
    pub fn route(&self, output: Output) {
        let line = match output {
            Output::Line(line) => line,
            Output::TooLong => {
                self.skipped("a message over --max-message-size");
                return;
            }
        };
        let Some(content) = crate::jsonrpc::framing::trimmed(&line) else {
            return;
        };
        let line = line.slice_ref(content);
        let parsed = match message::parse(&line) {
            Ok(parsed) => parsed,
            Err(_) => {
                self.skipped("a line that is not JSON-RPC");
                return;
            }
        };
        let one_line = Bytes::from(crate::jsonrpc::framing::one_line(&line).into_owned());
        // A message tied to one of the child's tasks goes to the request holding that task,
        // before any guess about which call asked.
        if self.shared
            && parsed.kind != Kind::Response
            && let Some(task) = task_of(&parsed)
        {
            let pending = self.pending.lock().expect("backend lock");
            if let Some(holder) = pending.values().find(|p| p.task.as_deref() == Some(&task)) {
                send_all(&holder.waiters, Event::Message(one_line));
            } else {
                // Nobody holds the task yet (its creation's answer is still on its way to
                // the gateway): kept for the holder, never guessed onto another call.
                drop(pending);
                let asker = (parsed.kind == Kind::Request)
                    .then(|| parsed.id.map_or("null", |i| i.get()).to_owned());
                for refused in self.orphans.keep(task, one_line, asker) {
                    self.send_now(Bytes::from(crate::jsonrpc::error::error_response(
                        &refused,
                        crate::jsonrpc::error::INTERNAL_ERROR,
                        "no client holds this task",
                        None,
                    )));
                }
            }
            return;
        }
        match parsed.kind {
            Kind::Response => self.answer(&parsed, one_line),
            Kind::Notification
                if parsed.method.as_deref() == Some("notifications/progress")
                    && let Some(token) = progress_token_of(parsed.params) =>
            {
                self.progress(&token, one_line);
            }
            Kind::Notification
                if self.shared
                    && let Some(listen) = subscription_of(parsed.params) =>
            {
                // A 2026-07-28 child's listen stream: it goes to the listen it names.
                let pending = self.pending.lock().expect("backend lock");
                if let Some(p) = pending.get(&listen) {
                    send_all(&p.waiters, Event::Message(one_line));
                }
            }
            Kind::Notification
                if self.shared
                    && parsed
                        .method
                        .as_deref()
                        .is_some_and(crate::era::bridge::is_change_notification) =>
            {
                self.events.change(one_line);
            }
            Kind::Request if self.shared => self.shared_question(&parsed, one_line),
            _ => {
                // A request of the server's, or a notification with no token to place it:
                // it belongs to the request in progress if there is exactly one.
                let pending = self.pending.lock().expect("backend lock");
                if pending.len() == 1 {
                    let only = pending.values().next().expect("one entry");
                    send_all(&only.waiters, Event::Message(one_line));
                } else {
                    drop(pending);
                    self.events.push(one_line);
                }
            }
        }
    }

    /// An answer: to whoever waits for its id.
    fn answer(&self, parsed: &Message<'_>, one_line: Bytes) {
        let Some(id) = parsed.id.and_then(IdKey::from_raw) else {
            tracing::warn!(session = %self.name, "the server answered with a null id; dropped");
            return;
        };
        let waiting = self.pending.lock().expect("backend lock").remove(&id);
        match waiting {
            Some(pending) => send_all(&pending.waiters, Event::Answer(one_line)),
            None => {
                tracing::debug!(session = %self.name, %id, "an answer nobody waits for (the client gave up); dropped")
            }
        }
    }

    /// A progress notification: to the request whose token it names, else the server events.
    fn progress(&self, token: &str, one_line: Bytes) {
        let pending = self.pending.lock().expect("backend lock");
        match pending
            .values()
            .find(|p| p.progress.as_deref() == Some(token))
        {
            Some(p) => send_all(&p.waiters, Event::Message(one_line)),
            None => {
                drop(pending);
                self.events.push(one_line);
            }
        }
    }

    /// A pooled child's question. It serves many calls at once, and a handshake-era
    /// server's request names none of them. A call already waiting for an answer cannot be
    /// asking, so the request is the call's if only one other call runs; asking one client
    /// another client's question would be worse than refusing.
    fn shared_question(&self, parsed: &Message<'_>, one_line: Bytes) {
        let mut pending = self.pending.lock().expect("backend lock");
        // A held `tasks/result` stands for a task: it takes only what is tied to its task.
        let running = pending.values().filter(|p| p.task.is_none()).count();
        let mut free = pending
            .values_mut()
            .filter(|p| !p.asking && p.task.is_none());
        let (first, second) = (free.next(), free.next());
        let several = second.is_some();
        if let (Some(only), None) = (first, second) {
            only.asking = true;
            send_all(&only.waiters, Event::Message(one_line));
            return;
        }
        drop(pending);
        let id = parsed.id.map_or("null", |i| i.get());
        let why = if several {
            "the gateway cannot tell which of several calls in progress this request belongs to; ask while one call runs"
        } else if running > 0 {
            "every call in progress is already waiting for the answer to a question; ask one question at a time"
        } else {
            "no call is in progress: a 2026-07-28 client can be asked only during a call"
        };
        let refusal = crate::jsonrpc::error::error_response(
            id,
            crate::jsonrpc::error::INTERNAL_ERROR,
            why,
            None,
        );
        if several {
            tracing::warn!(session = %self.name, "the server asked something while several calls were in progress; refused");
        } else {
            tracing::debug!(session = %self.name, %why, "the server asked something no call can take; refused");
        }
        self.send_now(Bytes::from(refusal));
    }

    /// Counts a skipped line, and logs the first few and then each power of ten.
    fn skipped(&self, what: &str) {
        let n = self.skipped_lines.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 3 || is_power_of_ten(n) {
            tracing::warn!(session = %self.name, skipped = n, "the server wrote {what} on stdout; skipped ({n} so far)");
        }
    }
}

impl Backend for StdioBackend {
    fn register(
        &self,
        id: IdKey,
        body: &Bytes,
        progress: Option<String>,
        waiter: mpsc::Sender<Event>,
    ) -> Result<bool, Conflict> {
        let mut pending = self.pending.lock().expect("backend lock");
        if let Some(existing) = pending.get_mut(&id) {
            if existing.body != *body {
                return Err(Conflict::DifferentRequest);
            }
            existing.waiters.push(waiter);
            return Ok(false); // the same request again: wait for the same answer
        }
        // Held `tasks/result`s are bounded by the tasks table, not by this.
        if pending.values().filter(|p| p.task.is_none()).count() >= self.max_pending {
            return Err(Conflict::Full);
        }
        pending.insert(
            id,
            Pending {
                body: body.clone(),
                waiters: vec![waiter],
                progress,
                asking: false,
                task: None,
            },
        );
        Ok(true)
    }

    fn send(
        &self,
        line: Bytes,
        wait: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<(), Undeliverable>> + Send + '_>> {
        Box::pin(async move {
            self.stdin
                .send_timeout(line, wait)
                .await
                .map_err(|e| match e {
                    mpsc::error::SendTimeoutError::Timeout(_) => Undeliverable::Full,
                    mpsc::error::SendTimeoutError::Closed(_) => Undeliverable::Gone,
                })
        })
    }

    fn send_now(&self, line: Bytes) {
        let _ = self.stdin.try_send(line);
    }

    fn forget(&self, id: &IdKey) {
        self.pending.lock().expect("backend lock").remove(id);
    }

    fn set_asking(&self, id: &IdKey, asking: bool) {
        if let Some(pending) = self.pending.lock().expect("backend lock").get_mut(id) {
            pending.asking = asking;
        }
    }

    fn register_tied(
        &self,
        id: IdKey,
        body: &Bytes,
        task: &str,
        waiter: mpsc::Sender<Event>,
    ) -> Result<(), Conflict> {
        let mut pending = self.pending.lock().expect("backend lock");
        if pending.contains_key(&id) {
            return Err(Conflict::DifferentRequest);
        }
        // What the child said tied to the task before anyone held it goes first.
        let early = self.orphans.take(task);
        for line in early {
            let _ = waiter.try_send(Event::Message(line));
        }
        pending.insert(
            id,
            Pending {
                body: body.clone(),
                waiters: vec![waiter],
                progress: None,
                asking: false,
                task: Some(task.to_owned()),
            },
        );
        Ok(())
    }

    fn pending_count(&self) -> usize {
        self.pending.lock().expect("backend lock").len()
    }

    fn fail_all(&self, why: &str) {
        let pending: Vec<Pending> = self
            .pending
            .lock()
            .expect("backend lock")
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in pending {
            send_all(&p.waiters, Event::Failed(why.to_owned()));
        }
    }
}

fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

/// `params.progressToken` of a progress notification, as `progress_key` makes it.
fn progress_token_of(params: Option<&RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(rename = "progressToken", borrow)]
        token: &'a RawValue,
    }
    let params: Params<'_> = serde_json::from_str(params?.get()).ok()?;
    Some(progress_key(params.token.get()))
}

/// The child's task a request or notification is tied to: its `related-task` `_meta`, or
/// the task a 2025-11-25 status notification is about.
fn task_of(parsed: &Message<'_>) -> Option<String> {
    let params = parsed.params?.get();
    let status = parsed.method.as_deref() == Some(crate::era::tasks::LEGACY_STATUS_NOTIFICATION);
    // Most messages are not tied to a task: not worth a parse (log lines can be large).
    if !status && memchr::memmem::find(params.as_bytes(), b"related-task").is_none() {
        return None;
    }
    let params: Value = serde_json::from_str(params).ok()?;
    let task = if status {
        params["taskId"].as_str()
    } else {
        crate::era::tasks::related_task(&params)
    };
    task.map(str::to_owned)
}

/// `params._meta["io.modelcontextprotocol/subscriptionId"]` of a notification, as the key
/// its listen request was registered under.
fn subscription_of(params: Option<&RawValue>) -> Option<IdKey> {
    let params = params?.get();
    // Most notifications are not tagged: not worth a parse (log lines can be large).
    memchr::memmem::find(
        params.as_bytes(),
        crate::era::META_SUBSCRIPTION_ID.as_bytes(),
    )?;
    let params: Value = serde_json::from_str(params).ok()?;
    let id = params.get("_meta")?.get(crate::era::META_SUBSCRIPTION_ID)?;
    IdKey::from_raw(&serde_json::value::to_raw_value(id).ok()?)
}
