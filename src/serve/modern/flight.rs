//! A call sent to the child: under a fresh gateway id with its progress token remapped,
//! registered on the child's session, and guarded so that a call nobody answers any more is
//! cancelled in the child.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST, error_response};
use crate::jsonrpc::message::IdKey;
use crate::serve::backend::{Conflict, Undeliverable};
use crate::serve::child_call::{ChildCall, InFlight};
use crate::serve::gateway::Gateway;
use crate::serve::pool::Backend;
use crate::serve::responses::json_error;
use crate::serve::session::Session;

/// Why a call could not be sent.
pub(super) enum SendRefused {
    Full(usize),
    Conflict,
    Undeliverable(Undeliverable),
}

impl SendRefused {
    pub(super) fn response(&self, gateway: &Gateway, raw_id: &str) -> Response<Body> {
        match self {
            SendRefused::Full(max) => json_error(
                StatusCode::TOO_MANY_REQUESTS,
                raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Too Many Requests: --max-requests-per-session ({max}) requests are in flight on this backend"
                ),
            ),
            SendRefused::Conflict => json_error(
                StatusCode::CONFLICT,
                raw_id,
                INVALID_REQUEST,
                "Conflict: gateway id reused",
            ),
            // No session to be "not found": the pool replaces the child on the next request.
            SendRefused::Undeliverable(Undeliverable::Gone) => json_error(
                StatusCode::BAD_GATEWAY,
                raw_id,
                INTERNAL_ERROR,
                "the MCP server process has exited; try again",
            ),
            SendRefused::Undeliverable(full) => gateway.undeliverable(raw_id, full),
        }
    }
}

/// Sends a request to the child under a fresh gateway id, its progress token remapped.
pub(super) async fn send(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    method: &str,
    mut params: Map<String, Value>,
) -> Result<ChildCall, SendRefused> {
    let upstream_id = gateway.pool.next_id();
    // The client's progress token is the client's: the child sees the gateway's id as the
    // token, and notifications go back with the original.
    let remapped = params
        .get_mut("_meta")
        .and_then(Value::as_object_mut)
        .and_then(|meta| {
            meta.get_mut("progressToken")
                .map(|token| *token = upstream_id.clone().into())
        })
        .is_some();
    let line = Bytes::from(crate::era::request::request_line(
        &serde_json::to_string(&upstream_id).expect("a string"),
        method,
        &params,
    ));
    let session = backend.session.clone();
    let key = IdKey::Str(upstream_id.clone());
    let (tx, rx) = mpsc::channel(64);
    let token = remapped.then(|| format!("s:{upstream_id}"));
    match session.backend.register(key.clone(), &line, token, tx) {
        Ok(_) => {}
        Err(Conflict::Full) => {
            return Err(SendRefused::Full(gateway.config.max_requests_per_session));
        }
        Err(Conflict::DifferentRequest) => return Err(SendRefused::Conflict),
    }
    session.busy.fetch_add(1, Ordering::Relaxed);
    let mut guard = InFlight {
        session: session.clone(),
        key,
        upstream_id,
        answered: false,
    };
    if let Err(undeliverable) = session
        .backend
        .send(line, gateway.config.response_timeout)
        .await
    {
        guard.answered = true;
        session.backend.forget(&guard.key);
        return Err(SendRefused::Undeliverable(undeliverable));
    }
    Ok(ChildCall { guard, rx })
}

/// Answers a child's request with an error (best effort: never wait on a child that is not
/// reading).
pub(super) fn refuse(session: &Session, child_raw_id: &str, code: i64, message: &str) {
    let refusal = error_response(child_raw_id, code, message, None);
    session.backend.send_now(Bytes::from(refusal));
}
