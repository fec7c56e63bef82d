//! The backends of 2026-07-28 clients: stateless requests have no session to hang a child on,
//! so they go to a child owned by their principal (one shared child without auth or with the
//! static token), started and initialized once, and shared by all that principal's requests
//! (ids remapped, so concurrent clients never collide). A dead child is replaced on the next
//! request; an idle one is reaped like any session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::OnceCell;

use super::session::Session;
use super::sessions::Refused;
use super::tool_cache::ToolCache;

/// A pooled child and what its handshake told us.
pub struct Backend {
    pub session: Arc<Session>,
    /// The child's `initialize` result (`server/discover` is answered from it); `Null`
    /// for a 2026-07-28 child, which answers `server/discover` itself.
    pub initialize: Value,
    /// A 2026-07-28 child: requests keep their envelope and `input_required` is its own.
    pub modern: bool,
    /// `x-mcp-header` parameters by tool, from the child's `tools/list` (filled on first
    /// use, dropped when the child says its tools changed).
    pub tool_headers: tokio::sync::Mutex<ToolCache>,
    /// Listens per resource URI the child is subscribed to (for `subscriptions/listen`).
    pub resource_listeners: Mutex<HashMap<String, usize>>,
}

/// A principal's backend, started at most once (concurrent first requests wait for it).
type Slot = Arc<OnceCell<Arc<Backend>>>;

#[derive(Default)]
pub struct Pool {
    backends: Mutex<HashMap<Option<String>, Slot>>,
    next_id: AtomicU64,
}

/// Why no backend is available.
pub enum Unavailable {
    Refused(Refused),
    /// The child did not complete its handshake.
    Handshake(String),
}

impl Pool {
    /// A fresh upstream id, unique for the gateway (`gw-N`).
    pub fn next_id(&self) -> String {
        format!("gw-{}", self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// The principal's backend, started by `start` (given the principal and a fresh
    /// upstream id) on first use, replaced if dead.
    pub async fn backend<Start, Started>(
        &self,
        principal: Option<String>,
        start: Start,
    ) -> Result<Arc<Backend>, Unavailable>
    where
        Start: Fn(Option<String>, String) -> Started,
        Started: Future<Output = Result<Arc<Backend>, Unavailable>>,
    {
        for _ in 0..2 {
            let cell = self
                .backends
                .lock()
                .expect("pool lock")
                .entry(principal.clone())
                .or_default()
                .clone();
            let backend = cell
                .get_or_try_init(|| start(principal.clone(), self.next_id()))
                .await?;
            if !backend.session.ended.is_cancelled() {
                return Ok(backend.clone());
            }
            // Its child is gone: forget it (if nobody did yet) and start another.
            let mut backends = self.backends.lock().expect("pool lock");
            if backends
                .get(&principal)
                .is_some_and(|c| Arc::ptr_eq(c, &cell))
            {
                backends.remove(&principal);
            }
        }
        Err(Unavailable::Handshake(
            "the MCP server process keeps exiting".into(),
        ))
    }
}
