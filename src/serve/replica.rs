//! Serving among replicas: sending a request to the replica that owns its session or its
//! parked round (with this replica's introduction), and turning a failed forward into the
//! answer a client can act on: an owner that is gone means the session is gone (404, so
//! the client starts a new one), a full forwarding table or a silent owner means try again.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::Value;

use super::cluster::{Failure, Owner};
use super::gateway::Gateway;
use super::responses::json_error;
use crate::era::envelope;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST};
use crate::jsonrpc::message::Message;

/// What a forward is for: the answer to a failure differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A request of a legacy session (POST, the GET stream, DELETE).
    Session,
    /// A 2026-07-28 retry that answers a round parked on the owner.
    Retry,
    /// A 2026-07-28 tasks request for a task the owner holds.
    Task,
}

/// A request the owner must serve, as this replica received it.
pub struct Forward<'a> {
    pub owner: String,
    pub method: Method,
    pub path_and_query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
    pub principal: Option<&'a str>,
    /// What a policy rule sees of the caller, sent along for the owner's policy.
    pub identity: Option<&'a crate::policy::Principal>,
    /// The id a failure answers to (`null` when unknown).
    pub raw_id: &'a str,
    pub purpose: Purpose,
}

/// Sends the request to its owner and returns the owner's answer, or this replica's
/// answer when the owner cannot give one.
pub async fn to_owner(gateway: &Gateway, forward: Forward<'_>) -> Response<Body> {
    let cluster = gateway
        .cluster
        .as_ref()
        .expect("forwarding needs a cluster");
    let bound = crate::serve::cluster::Bound {
        to: &forward.owner,
        method: &forward.method,
        path_and_query: forward.path_and_query,
        session: super::responses::header(forward.headers, super::legacy::SESSION_ID),
        last_event_id: super::responses::header(forward.headers, "last-event-id"),
    };
    let introduction =
        cluster.introduce_as(&bound, &forward.body, forward.principal, forward.identity);
    let sent = cluster
        .forwarder
        .send(
            &forward.owner,
            forward.method.clone(),
            forward.path_and_query,
            forward.headers,
            introduction,
            forward.body,
        )
        .await;
    let failure = match sent {
        Ok(response) => {
            gateway.metrics.forwarded("answered");
            return response;
        }
        Err(failure) => failure,
    };
    gateway.metrics.forwarded(failure.outcome());
    tracing::warn!(owner = %forward.owner, outcome = failure.outcome(), "a request could not be forwarded to the replica that owns it: {}", describe(&failure));
    let raw_id = forward.raw_id;
    match (&failure, forward.purpose) {
        (Failure::Gone(_), Purpose::Session) => json_error(
            StatusCode::NOT_FOUND,
            raw_id,
            INVALID_REQUEST,
            "Session not found: the replica that held it is gone; start a new session with initialize",
        ),
        (Failure::Gone(_), Purpose::Retry) => json_error(
            StatusCode::BAD_REQUEST,
            raw_id,
            INVALID_PARAMS,
            "the replica holding this call is gone, and the call with it; call again without requestState",
        ),
        (Failure::Gone(_), Purpose::Task) => json_error(
            StatusCode::OK,
            raw_id,
            INVALID_PARAMS,
            "Invalid params: unknown task (the replica holding it is gone, and the task with it)",
        ),
        (Failure::Busy(max), _) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            raw_id,
            INTERNAL_ERROR,
            &format!(
                "Service Unavailable: --peer-max-connections ({max}) requests are being forwarded to other replicas; try again shortly"
            ),
        ),
        (Failure::Timeout, _) => json_error(
            StatusCode::GATEWAY_TIMEOUT,
            raw_id,
            INTERNAL_ERROR,
            "Gateway Timeout: the replica that owns this session did not answer in time",
        ),
        (Failure::Failed(_), _) => json_error(
            StatusCode::BAD_GATEWAY,
            raw_id,
            INTERNAL_ERROR,
            "Bad Gateway: the connection to the replica that owns this session failed; the request may or may not have reached it",
        ),
    }
}

fn describe(failure: &Failure) -> String {
    match failure {
        Failure::Busy(max) => format!("{max} forwards open (--peer-max-connections)"),
        Failure::Gone(why) | Failure::Failed(why) => why.clone(),
        Failure::Timeout => "no answer in time".into(),
    }
}

/// The replica a 2026-07-28 retry or tasks request must go to: the one its `requestState`
/// or task id names, if that is another replica of this cluster. Other requests (nearly
/// all) cost one substring search.
pub fn retry_owner(gateway: &Arc<Gateway>, body: &[u8], parsed: &Message<'_>) -> Option<String> {
    let cluster = gateway.cluster.as_ref()?;
    let method = parsed.method.as_deref().unwrap_or_default();
    let tasks_method = matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel");
    if !tasks_method {
        memchr::memmem::find(body, b"requestState")?;
    }
    let params = envelope::params_object(parsed.params)?;
    let owner = if tasks_method {
        // A task id names the replica that holds the task, like a sealed state.
        gateway
            .tasks
            .owner(params.get("taskId").and_then(Value::as_str)?)?
    } else {
        gateway
            .parked
            .owner(params.get("requestState").and_then(Value::as_str)?)?
    };
    match cluster.owner(&owner) {
        Owner::Me => None,
        Owner::Peer(owner) => Some(owner),
    }
}
