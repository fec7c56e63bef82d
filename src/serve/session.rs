//! One session with a backend: a handshake-era client's (reached by its id) or a
//! principal's pooled backend. It holds the backend, the events the backend sends outside
//! any request, and what the table and the reaper need: who owns it, when it began, whether
//! it is busy, and its end.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::backend::Backend;
use super::server_events::ServerEvents;
use super::tool_annotations::ToolAnnotations;
use crate::policy;

pub struct Session {
    pub id: String,
    /// Who created it (the authenticated principal); others cannot use it.
    pub principal: Option<String>,
    /// What answers its requests.
    pub backend: Arc<dyn Backend>,
    /// What the backend says outside any request.
    pub events: Arc<ServerEvents>,
    last_active: Mutex<Instant>,
    /// GET streams and requests in progress: the idle reaper leaves such a session alone.
    pub busy: AtomicUsize,
    /// Fired to end the session (DELETE, idle, shutdown); the supervisor ends the backend.
    pub end: CancellationToken,
    /// Fired once the session is over (the backend is gone or going).
    pub ended: CancellationToken,
    pub created: Instant,
    /// A pooled backend for 2026-07-28 clients: never reachable by a session id.
    pub pooled: bool,
    /// Its tools' annotations, for policy rules that read them.
    pub tools: Arc<ToolAnnotations>,
    /// The client application, from its `initialize` (handshake-era sessions).
    pub client: OnceLock<policy::Client>,
    /// The protocol version its client speaks (the `MCP-Protocol-Version` of its first
    /// request after `initialize`), for the session duration metric.
    pub protocol_version: OnceLock<String>,
}

impl Session {
    pub fn new(
        id: String,
        principal: Option<String>,
        backend: Arc<dyn Backend>,
        events: Arc<ServerEvents>,
        pooled: bool,
    ) -> Self {
        Session {
            id,
            principal,
            backend,
            last_active: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            end: CancellationToken::new(),
            ended: CancellationToken::new(),
            created: Instant::now(),
            pooled,
            tools: Arc::new(ToolAnnotations::new(events.changes.subscribe())),
            client: OnceLock::new(),
            protocol_version: OnceLock::new(),
            events,
        }
    }

    /// The session ended: its duration metric (a handshake-era client's session only;
    /// `error_type` when its server exited under it).
    pub fn record_duration(&self, error_type: Option<&str>) {
        if !self.pooled {
            crate::telemetry::session_ended(
                self.created.elapsed(),
                self.protocol_version.get().map(String::as_str),
                error_type,
            );
        }
    }

    pub fn touch(&self) {
        *self.last_active.lock().expect("session lock") = Instant::now();
    }

    pub fn idle_since(&self) -> Instant {
        *self.last_active.lock().expect("session lock")
    }

    /// The backend is gone: every waiting request fails, and the session is over.
    pub fn fail_all(&self, why: &str) {
        self.backend.fail_all(why);
        self.ended.cancel();
        self.events.changed.notify_waiters();
    }

    pub fn pending_count(&self) -> usize {
        self.backend.pending_count()
    }
}
