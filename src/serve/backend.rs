//! The backend seam: what both endpoints drive, whatever answers behind it. A backend takes
//! a JSON-RPC request (registered under its id, then sent) and gives back its events on the
//! waiter it was registered with: the request's own notifications, the backend's questions
//! while the request runs, and the answer. What belongs to no request goes to the session's
//! server events. A handshake-era session and a principal's pooled backend both hold one.
//!
//! The stdio child (`stdio_backend.rs`) is the first implementation. A remote Streamable
//! HTTP or HTTP+SSE server, driven by the relay's link engine, would be the second (see
//! `docs/architecture.md`, "The backend seam"); the endpoints and the front door would not
//! change.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::jsonrpc::message::IdKey;

/// What a waiting request hears.
#[derive(Debug, Clone)]
pub enum Event {
    /// A notification or server request that belongs on this request's stream.
    Message(Bytes),
    /// The answer: the stream ends with it.
    Answer(Bytes),
    /// No answer will come (the backend failed or ended).
    Failed(String),
}

/// Why a message could not be handed to the backend.
#[derive(Debug, PartialEq, Eq)]
pub enum Undeliverable {
    /// The backend is gone.
    Gone,
    /// The backend has not taken a message for the whole wait: its queue is full.
    Full,
}

/// Why a request of the gateway's own got no answer.
#[derive(Debug)]
pub enum Unanswered {
    /// It could not be registered (its id is taken, or the session is full).
    Refused,
    /// The backend could not be given it.
    NotSent,
    /// The backend failed or ended before answering.
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

/// A server behind the gateway that answers requests and sends notifications and
/// questions back.
pub trait Backend: Send + Sync {
    /// Starts waiting for what belongs to request `id` (whose bytes are `body`, whose
    /// progress token is `progress` as `progress_key` makes it). `Ok(false)`: the same
    /// request is already running, and `waiter` hears its answer too.
    fn register(
        &self,
        id: IdKey,
        body: &Bytes,
        progress: Option<String>,
        waiter: mpsc::Sender<Event>,
    ) -> Result<bool, Conflict>;

    /// Hands one message to the backend, waiting at most `wait` for room: a backend that
    /// stops taking messages must not hold a client's request forever.
    fn send(
        &self,
        line: Bytes,
        wait: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<(), Undeliverable>> + Send + '_>>;

    /// Hands one message over only if the backend takes it at once (a cancellation, an
    /// answer to its question): never wait on a backend that is not reading.
    fn send_now(&self, line: Bytes);

    /// Stops waiting for `id` (the client gave up, or the answer never came in time).
    fn forget(&self, id: &IdKey);

    /// Request `id` waits for the answer to the backend's question (`true`), or has it.
    fn set_asking(&self, id: &IdKey, asking: bool);

    /// Registers request `id` (the gateway's held `tasks/result`) as standing for the
    /// backend's task `task`: what the backend says tied to that task (`related-task`
    /// `_meta`, its status notifications) goes to it, whatever else runs. Such requests are
    /// bounded by the tasks table, not by `--max-requests-per-session`.
    fn register_tied(
        &self,
        id: IdKey,
        body: &Bytes,
        _task: &str,
        waiter: mpsc::Sender<Event>,
    ) -> Result<(), Conflict> {
        self.register(id, body, None, waiter).map(|_| ())
    }

    /// Requests registered and not yet answered.
    fn pending_count(&self) -> usize;

    /// The backend is gone: every waiting request hears `why`.
    fn fail_all(&self, why: &str);

    /// Where a name or URI its client sees leads, when the backend stands for several
    /// servers (an aggregate endpoint).
    fn owner_of(&self, _named: Named, _public: &str) -> Owner {
        Owner::Itself
    }

    /// Whether the backend stands for several servers (then `owner_of` tells them apart).
    fn stands_for_several(&self) -> bool {
        false
    }
}

/// Whose a name or URI is (`Backend::owner_of`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The backend is one server: the name is its own.
    Itself,
    /// A member server, and its own name or URI for it.
    Member { server: String, name: String },
    /// Not known (yet): the lists that name it are unread, or it names nothing.
    Unknown,
}

/// What kind of name `Backend::owner_of` is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Tool,
    Prompt,
    /// A resource's URI, or a template's.
    Resource,
}

/// Sends a request of the gateway's own (`line`, with id `id`) and waits at most `wait` for
/// its answer, ignoring what else the backend says meanwhile.
pub async fn ask(
    backend: &dyn Backend,
    id: IdKey,
    line: Bytes,
    wait: Duration,
) -> Result<Bytes, Unanswered> {
    let (tx, mut rx) = mpsc::channel(8);
    backend
        .register(id.clone(), &line, None, tx)
        .map_err(|_| Unanswered::Refused)?;
    let answered = async {
        backend
            .send(line, wait)
            .await
            .map_err(|_| Unanswered::NotSent)?;
        loop {
            match rx.recv().await {
                Some(Event::Answer(answer)) => return Ok(answer),
                Some(Event::Message(_)) => continue,
                Some(Event::Failed(why)) => return Err(Unanswered::Failed(why)),
                None => return Err(Unanswered::Failed("the backend ended".into())),
            }
        }
    };
    let result = tokio::time::timeout(wait, answered)
        .await
        .unwrap_or(Err(Unanswered::TimedOut));
    backend.forget(&id);
    result
}

/// A request's `params._meta.progressToken`, as the key `register` takes.
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
    Some(progress_key(params.meta?.token?.get()))
}

/// A progress token as a key: tokens compare by value, so `"a"` and `"\u0061"` are the
/// same string token.
pub fn progress_key(raw: &str) -> String {
    match serde_json::from_str::<String>(raw) {
        Ok(s) => format!("s:{s}"),
        Err(_) => format!("n:{}", raw.trim()),
    }
}

/// Hands `event` to every waiter. A waiter whose client went away is gone; a full one is a
/// slow client, whose event is dropped rather than letting it hold the backend's output up.
pub fn send_all(waiters: &[mpsc::Sender<Event>], event: Event) {
    for waiter in waiters {
        if let Err(mpsc::error::TrySendError::Full(_)) = waiter.try_send(event.clone()) {
            tracing::warn!("a client reads its stream too slowly; an event was dropped");
        }
    }
}
