//! Starting a principal's pooled backend for 2026-07-28 clients: a child of its own (a
//! session the pool holds), given its handshake when it is a handshake-era server.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use super::backend::{Unanswered, ask};
use super::child_era::ChildEra;
use super::gateway::Gateway;
use super::pool::{Backend, Unavailable};
use super::session::Session;
use super::sessions::short;
use super::tool_cache::ToolCache;
use crate::era::{LATEST_LEGACY_VERSION, relay_info};
use crate::jsonrpc::message::IdKey;

/// The principal's backend: the one it has, or one started now.
pub async fn backend(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
) -> Result<Arc<Backend>, Unavailable> {
    gateway
        .pool
        .backend(principal, |principal, id| start(gateway, principal, id))
        .await
}

/// A backend on a 2026-07-28 child: no handshake.
fn modern_backend(session: Arc<Session>) -> Arc<Backend> {
    tracing::info!(session = %short(&session.id), "pooled 2026-07-28 backend ready");
    Arc::new(Backend {
        tool_headers: ToolCache::new(session.events.changes.subscribe()).into(),
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
        .open_session(principal, true)
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
    let request = Bytes::from(request.to_string());
    let answer = match ask(&*session.backend, IdKey::Str(id), request, wait).await {
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
        .backend
        .send(
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            wait,
        )
        .await;
    tracing::info!(session = %short(&session.id), "pooled backend ready for 2026-07-28 clients");
    Ok(Arc::new(Backend {
        tool_headers: ToolCache::new(session.events.changes.subscribe()).into(),
        session,
        initialize: result,
        modern: false,
        resource_listeners: Default::default(),
    }))
}
