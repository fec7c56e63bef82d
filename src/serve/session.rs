//! One legacy-era session: its child, the requests waiting for answers, and the GET
//! stream's replay buffer. The child's output is routed here: answers to the request that
//! asked, a request's own notifications (and, when only one request is waiting, the
//! server's questions and log lines) to that request's stream, the rest to the GET stream.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{Notify, broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::child::Output;
use crate::jsonrpc::message::{self, IdKey, Kind};

/// What a waiting request hears.
#[derive(Debug, Clone)]
pub enum Event {
    /// A notification or server request that belongs on this request's stream.
    Message(Bytes),
    /// The answer: the stream ends with it.
    Answer(Bytes),
    /// No answer will come (the child died).
    Failed(String),
}

struct Pending {
    /// The request's bytes: a reused id with other bytes is a conflict.
    body: Bytes,
    /// Everyone waiting (a client that re-sends the same request while it runs waits too).
    waiters: Vec<mpsc::Sender<Event>>,
    /// `params._meta.progressToken`, as raw JSON text.
    progress: Option<String>,
    /// The child asked this call something and waits for the answer: it cannot be the
    /// one asking anything else.
    asking: bool,
}

/// Why a message could not be handed to the child.
#[derive(Debug, PartialEq, Eq)]
pub enum Undeliverable {
    /// The child is gone.
    Gone,
    /// The child has not read its input for the whole wait: `--child-queue` is full.
    Full,
}

/// Why a request of the gateway's own got no answer.
#[derive(Debug)]
pub enum Unanswered {
    /// It could not be registered (its id is taken, or the session is full).
    Refused,
    /// The child could not be given it.
    NotSent,
    /// The child failed or ended before answering.
    Failed(String),
    /// No answer within the wait.
    TimedOut,
}

/// Why a request cannot be registered.
#[derive(Debug, PartialEq, Eq)]
pub enum Conflict {
    /// The id is in flight with a different request.
    DifferentRequest,
    /// `--max-requests-per-session` are in flight.
    Full,
}

/// The GET stream's events: numbered per session, the newest kept for `Last-Event-ID`.
struct Outbound {
    events: VecDeque<(u64, Bytes)>,
    next_id: u64,
    capacity: usize,
    /// Bumped by every new GET; an older stream sees it and ends, so each event goes out
    /// on one stream only.
    generation: u64,
}

pub struct Session {
    pub id: String,
    /// Who created it (the authenticated principal); others cannot use it.
    pub principal: Option<String>,
    pub stdin: mpsc::Sender<Bytes>,
    pending: Mutex<HashMap<IdKey, Pending>>,
    max_pending: usize,
    outbound: Mutex<Outbound>,
    pub outbound_changed: Notify,
    last_active: Mutex<Instant>,
    /// GET streams and requests in progress: the idle reaper leaves such a session alone.
    pub busy: AtomicUsize,
    /// Fired to end the session (DELETE, idle, shutdown); the supervisor ends the child.
    pub end: CancellationToken,
    /// Fired once the session is over (the child is gone or going).
    pub ended: CancellationToken,
    pub created: Instant,
    dropped_events: AtomicU64,
    /// Lines from the child that were not JSON-RPC or were too long, so the log can say so
    /// without a line of its own for each (a server that prints its debug output to stdout
    /// would flood it).
    skipped_lines: AtomicU64,
    /// A pooled backend for 2026-07-28 clients: never reachable by a session id.
    pub pooled: bool,
    /// A pooled backend's list-changed and resource-updated notifications, for the
    /// gateway's `subscriptions/listen` streams.
    pub changes: broadcast::Sender<Bytes>,
}

impl Session {
    pub fn new(
        id: String,
        principal: Option<String>,
        stdin: mpsc::Sender<Bytes>,
        max_pending: usize,
        replay: usize,
        pooled: bool,
    ) -> Self {
        Session {
            id,
            principal,
            stdin,
            pending: Mutex::new(HashMap::new()),
            max_pending,
            outbound: Mutex::new(Outbound {
                events: VecDeque::new(),
                next_id: 1,
                capacity: replay,
                generation: 0,
            }),
            outbound_changed: Notify::new(),
            last_active: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            end: CancellationToken::new(),
            ended: CancellationToken::new(),
            created: Instant::now(),
            dropped_events: AtomicU64::new(0),
            skipped_lines: AtomicU64::new(0),
            pooled,
            // `--replay-buffer` bounds what a slow listen may fall behind, as it bounds
            // what a GET stream can replay; a listen further behind is ended to resync.
            changes: broadcast::channel(replay.max(1)).0,
        }
    }

    /// Queues one line for the child's stdin, waiting at most `wait` for room: a child that
    /// stops reading must not hold a client's request forever.
    pub async fn send_to_child(
        &self,
        line: Bytes,
        wait: std::time::Duration,
    ) -> Result<(), Undeliverable> {
        self.stdin
            .send_timeout(line, wait)
            .await
            .map_err(|e| match e {
                mpsc::error::SendTimeoutError::Timeout(_) => Undeliverable::Full,
                mpsc::error::SendTimeoutError::Closed(_) => Undeliverable::Gone,
            })
    }

    pub fn touch(&self) {
        *self.last_active.lock().expect("session lock") = Instant::now();
    }

    pub fn idle_since(&self) -> Instant {
        *self.last_active.lock().expect("session lock")
    }

    /// Starts waiting for the answer to request `id` (whose bytes are `body`).
    pub fn register(
        &self,
        id: IdKey,
        body: &Bytes,
        progress: Option<String>,
        waiter: mpsc::Sender<Event>,
    ) -> Result<bool, Conflict> {
        let mut pending = self.pending.lock().expect("session lock");
        if let Some(existing) = pending.get_mut(&id) {
            if existing.body != *body {
                return Err(Conflict::DifferentRequest);
            }
            existing.waiters.push(waiter);
            return Ok(false); // the same request again: wait for the same answer
        }
        if pending.len() >= self.max_pending {
            return Err(Conflict::Full);
        }
        pending.insert(
            id,
            Pending {
                body: body.clone(),
                waiters: vec![waiter],
                progress,
                asking: false,
            },
        );
        Ok(true)
    }

    /// Stops waiting for `id` (the client gave up, or the answer never came in time).
    /// Sends a request of the gateway's own (`line`, with id `id`) and waits at most
    /// `wait` for its answer, ignoring what else the child says meanwhile.
    pub async fn ask(&self, id: IdKey, line: Bytes, wait: Duration) -> Result<Bytes, Unanswered> {
        let (tx, mut rx) = mpsc::channel(8);
        self.register(id.clone(), &line, None, tx)
            .map_err(|_| Unanswered::Refused)?;
        let answered = async {
            self.send_to_child(line, wait)
                .await
                .map_err(|_| Unanswered::NotSent)?;
            loop {
                match rx.recv().await {
                    Some(Event::Answer(answer)) => return Ok(answer),
                    Some(Event::Message(_)) => continue,
                    Some(Event::Failed(why)) => return Err(Unanswered::Failed(why)),
                    None => return Err(Unanswered::Failed("the child ended".into())),
                }
            }
        };
        let result = tokio::time::timeout(wait, answered)
            .await
            .unwrap_or(Err(Unanswered::TimedOut));
        self.forget(&id);
        result
    }

    /// The child's question to call `id` was answered: the call may ask again.
    pub fn answered_question(&self, id: &IdKey) {
        self.set_asking(id, false);
    }

    /// Call `id` waits for the answer to the child's question.
    pub fn asking(&self, id: &IdKey) {
        self.set_asking(id, true);
    }

    fn set_asking(&self, id: &IdKey, asking: bool) {
        if let Some(pending) = self.pending.lock().expect("session lock").get_mut(id) {
            pending.asking = asking;
        }
    }

    /// Counts a skipped line, and logs the first few and then each power of ten.
    fn skipped(&self, what: &str) {
        let n = self.skipped_lines.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 3 || is_power_of_ten(n) {
            tracing::warn!(session = %self.id, skipped = n, "the server wrote {what} on stdout; skipped ({n} so far)");
        }
    }

    pub fn forget(&self, id: &IdKey) {
        self.pending.lock().expect("session lock").remove(id);
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
        match parsed.kind {
            Kind::Response => {
                let Some(id) = parsed.id.and_then(IdKey::from_raw) else {
                    tracing::warn!(session = %self.id, "the server answered with a null id; dropped");
                    return;
                };
                let waiting = self.pending.lock().expect("session lock").remove(&id);
                match waiting {
                    Some(pending) => send_all(&pending.waiters, Event::Answer(one_line)),
                    None => {
                        tracing::debug!(session = %self.id, %id, "an answer nobody waits for (the client gave up); dropped")
                    }
                }
            }
            Kind::Notification
                if parsed.method.as_deref() == Some("notifications/progress")
                    && let Some(token) = progress_token_of(parsed.params) =>
            {
                let pending = self.pending.lock().expect("session lock");
                match pending
                    .values()
                    .find(|p| p.progress.as_deref() == Some(&token))
                {
                    Some(p) => send_all(&p.waiters, Event::Message(one_line)),
                    None => {
                        drop(pending);
                        self.push_outbound(one_line);
                    }
                }
            }
            Kind::Notification
                if self.pooled
                    && let Some(listen) = subscription_of(parsed.params) =>
            {
                // A 2026-07-28 child's listen stream: it goes to the listen it names.
                let pending = self.pending.lock().expect("session lock");
                if let Some(p) = pending.get(&listen) {
                    send_all(&p.waiters, Event::Message(one_line));
                }
            }
            Kind::Notification
                if self.pooled
                    && parsed
                        .method
                        .as_deref()
                        .is_some_and(crate::era::bridge::is_change_notification) =>
            {
                // Nobody may be listening: then there is nothing to do.
                let _ = self.changes.send(one_line);
            }
            Kind::Request if self.pooled => {
                // A pooled child serves many calls at once, and a handshake-era server's
                // request names none of them. A call already waiting for an answer cannot
                // be asking, so the request is the call's if only one other call runs;
                // asking one client another client's question would be worse than refusing.
                let mut pending = self.pending.lock().expect("session lock");
                let running = pending.len();
                let mut free = pending.values_mut().filter(|p| !p.asking);
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
                    tracing::warn!(session = %self.id, "the server asked something while several calls were in progress; refused");
                } else {
                    tracing::debug!(session = %self.id, %why, "the server asked something no call can take; refused");
                }
                let _ = self.stdin.try_send(Bytes::from(refusal));
            }
            _ => {
                // A request of the server's, or a notification with no token to place it:
                // it belongs to the request in progress if there is exactly one.
                let pending = self.pending.lock().expect("session lock");
                if pending.len() == 1 {
                    let only = pending.values().next().expect("one entry");
                    send_all(&only.waiters, Event::Message(one_line));
                } else {
                    drop(pending);
                    self.push_outbound(one_line);
                }
            }
        }
    }

    fn push_outbound(&self, line: Bytes) {
        let mut outbound = self.outbound.lock().expect("session lock");
        let id = outbound.next_id;
        outbound.next_id += 1;
        outbound.events.push_back((id, line));
        if outbound.events.len() > outbound.capacity {
            outbound.events.pop_front();
            let dropped = self.dropped_events.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(session = %self.id, dropped, "the GET stream's replay buffer is full (--replay-buffer); the oldest events were dropped");
            }
        }
        drop(outbound);
        self.outbound_changed.notify_waiters();
    }

    /// A new GET stream: its generation, and where it starts (after `last_event_id`, or
    /// at the oldest kept event).
    pub fn open_stream(&self, last_event_id: Option<u64>) -> (u64, u64) {
        let mut outbound = self.outbound.lock().expect("session lock");
        outbound.generation += 1;
        let oldest = outbound
            .events
            .front()
            .map_or(outbound.next_id, |(id, _)| *id);
        let from = match last_event_id {
            Some(last) => (last + 1).max(oldest),
            None => outbound.next_id, // a fresh stream gets what comes from now on
        };
        let generation = outbound.generation;
        drop(outbound);
        self.outbound_changed.notify_waiters(); // an older stream ends
        (generation, from)
    }

    /// The events from `from` on, if the stream of `generation` is still the current one.
    pub fn events_from(&self, generation: u64, from: u64) -> Option<Vec<(u64, Bytes)>> {
        let outbound = self.outbound.lock().expect("session lock");
        if outbound.generation != generation {
            return None;
        }
        Some(
            outbound
                .events
                .iter()
                .filter(|(id, _)| *id >= from)
                .cloned()
                .collect(),
        )
    }

    /// The child is gone: every waiting request fails, and the session is over.
    pub fn fail_all(&self, why: &str) {
        let pending: Vec<Pending> = self
            .pending
            .lock()
            .expect("session lock")
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in pending {
            send_all(&p.waiters, Event::Failed(why.to_owned()));
        }
        self.ended.cancel();
        self.outbound_changed.notify_waiters();
    }

    pub fn pending_count(&self) -> usize {
        self.pending.lock().expect("session lock").len()
    }
}

fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

fn send_all(waiters: &[mpsc::Sender<Event>], event: Event) {
    for waiter in waiters {
        // A waiter whose client went away is gone; a full one is a slow client, whose
        // event is dropped rather than letting it hold the child's output up.
        if let Err(mpsc::error::TrySendError::Full(_)) = waiter.try_send(event.clone()) {
            tracing::warn!("a client reads its stream too slowly; an event was dropped");
        }
    }
}

/// `params.progressToken` of a progress notification, as raw JSON text.
fn progress_token_of(params: Option<&RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(rename = "progressToken", borrow)]
        token: &'a RawValue,
    }
    let params: Params<'_> = serde_json::from_str(params?.get()).ok()?;
    Some(normalize_token(params.token.get()))
}

/// A request's `params._meta.progressToken`, as raw JSON text.
pub fn request_progress_token(params: Option<&RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(rename = "progressToken", borrow)]
        token: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(rename = "_meta", borrow)]
        meta: Option<Meta<'a>>,
    }
    let params: Params<'_> = serde_json::from_str(params?.get()).ok()?;
    Some(normalize_token(params.meta?.token?.get()))
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

/// Tokens compare by value: `"a"` and `"\u0061"` are the same string token.
fn normalize_token(raw: &str) -> String {
    match serde_json::from_str::<String>(raw) {
        Ok(s) => format!("s:{s}"),
        Err(_) => format!("n:{}", raw.trim()),
    }
}
