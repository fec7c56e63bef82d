//! The backends of 2026-07-28 clients: stateless requests have no session to hang a child on,
//! so they go to a child owned by their principal (one shared child without auth or with the
//! static token), started and initialized once, and shared by all that principal's requests
//! (ids remapped, so concurrent clients never collide). A dead child is replaced on the next
//! request; an idle one is reaped like any session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use super::Gateway;
use super::child_era::ChildEra;
use super::session::{Session, Unanswered};
use super::sessions::Refused;
use super::tool_cache::ToolCache;
use crate::era::{LATEST_LEGACY_VERSION, relay_info};
use crate::jsonrpc::message::IdKey;

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

    /// The principal's backend, started and initialized on first use, replaced if dead.
    pub async fn backend(
        &self,
        gateway: &Arc<Gateway>,
        principal: Option<String>,
    ) -> Result<Arc<Backend>, Unavailable> {
        for _ in 0..2 {
            let cell = self
                .backends
                .lock()
                .expect("pool lock")
                .entry(principal.clone())
                .or_default()
                .clone();
            let backend = cell
                .get_or_try_init(|| start(gateway, principal.clone(), self.next_id()))
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

/// A backend on a 2026-07-28 child: no handshake.
fn modern_backend(session: Arc<Session>) -> Arc<Backend> {
    tracing::info!(session = %super::sessions::short(&session.id), "pooled 2026-07-28 backend ready");
    Arc::new(Backend {
        tool_headers: ToolCache::new(session.changes.subscribe()).into(),
        session,
        initialize: Value::Null,
        modern: true,
        resource_listeners: Default::default(),
    })
}

/// Spawns a child for `principal`; a handshake-era child also gets its handshake, declaring
/// what the gateway can ask a 2026-07-28 client in an `input_required` round (each request
/// is still checked against the capabilities that client declared in it).
async fn start(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    id: String,
) -> Result<Arc<Backend>, Unavailable> {
    let era = gateway.child_era().await;
    let session = gateway
        .sessions
        .create(gateway, principal, true)
        .map_err(Unavailable::Refused)?;
    if matches!(era, ChildEra::Modern) {
        return Ok(modern_backend(session));
    }
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": LATEST_LEGACY_VERSION,
        "capabilities": {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
        "clientInfo": relay_info(),
    }});
    let fail = |why: String| {
        gateway.sessions.end(&session);
        Unavailable::Handshake(why)
    };
    let wait = gateway.config.response_timeout;
    let answer = match session
        .ask(IdKey::Str(id), Bytes::from(request.to_string()), wait)
        .await
    {
        Ok(answer) => answer,
        Err(Unanswered::Refused) => {
            return Err(fail("the handshake could not be registered".into()));
        }
        Err(Unanswered::NotSent) => {
            return Err(fail("the MCP server process exited at once".into()));
        }
        Err(Unanswered::Failed(why)) => {
            return Err(fail(format!(
                "the MCP server process exited during the handshake: {why}"
            )));
        }
        Err(Unanswered::TimedOut) => {
            return Err(fail(format!(
                "the MCP server did not answer initialize within {} s (--timeout-response)",
                wait.as_secs_f64()
            )));
        }
    };
    let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    if answer.pointer("/error/code").and_then(Value::as_i64)
        == Some(crate::era::UNSUPPORTED_PROTOCOL_VERSION)
        && gateway.child_is_modern_after_all().await
    {
        // The same child serves on in the era it speaks.
        return Ok(modern_backend(session));
    }
    let Some(result) = answer.get("result").cloned() else {
        return Err(fail(format!(
            "the MCP server refused initialize: {}",
            answer["error"]
        )));
    };
    let _ = session
        .stdin
        .send(Bytes::from_static(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ))
        .await;
    tracing::info!(session = %super::sessions::short(&session.id), "pooled backend ready for 2026-07-28 clients");
    Ok(Arc::new(Backend {
        tool_headers: ToolCache::new(session.changes.subscribe()).into(),
        session,
        initialize: result,
        modern: false,
        resource_listeners: Default::default(),
    }))
}
