//! Routes what the upstream sends: answers to the gate, server requests and notifications
//! straight to the host.

use serde_json::value::RawValue;

use super::gate::Gate;
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message::{self, IdKey, Kind};

/// What one upstream payload contained for the request being served.
pub enum Routed {
    /// Nothing for this request (notifications, server requests, or other answers).
    Other,
    /// The answer to the request being served; not yet delivered, so the caller can look
    /// at it first (an `initialize` answer sets up the session before the host sees it).
    Own(Vec<u8>),
}

/// Routes one upstream payload (a message or, from a 2025-03-26 server, a batch).
/// `own` is the id of the request whose stream this is, if any.
pub async fn route(gate: &Gate, payload: &[u8], own: Option<&IdKey>) -> Routed {
    if message::is_batch(payload) {
        let Ok(items) = message::split_batch(payload) else {
            tracing::warn!("dropped an upstream batch that is not valid JSON");
            return Routed::Other;
        };
        let mut routed = Routed::Other;
        for item in items {
            if let Routed::Own(line) = route_one(gate, item.get().as_bytes(), own).await {
                routed = Routed::Own(line);
            }
        }
        return routed;
    }
    route_one(gate, payload, own).await
}

async fn route_one(gate: &Gate, payload: &[u8], own: Option<&IdKey>) -> Routed {
    let parsed = match message::parse(payload) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::warn!(problem = ?e, "dropped an upstream message that is not valid JSON-RPC");
            return Routed::Other;
        }
    };
    let line = one_line(payload).into_owned();
    if parsed.kind != Kind::Response {
        match gate.diverted() {
            Some(to) => {
                let _ = to.send(line).await;
            }
            None => {
                gate.outbox().send(line).await;
            }
        }
        return Routed::Other;
    }
    let id = parsed.id.and_then(IdKey::from_raw);
    match (id, own) {
        (Some(id), Some(own)) if id == *own => Routed::Own(line),
        (Some(id), _) => {
            gate.deliver(&id, line).await;
            Routed::Other
        }
        // An error with id null on our own stream is the answer to our request.
        (None, Some(own)) => match parsed.error {
            Some(error) => {
                let error: Box<RawValue> = error.to_owned();
                gate.deliver_error_object(own, &error).await;
                Routed::Own(Vec::new())
            }
            None => Routed::Other,
        },
        (None, None) => {
            tracing::warn!("dropped an upstream answer with a null id");
            Routed::Other
        }
    }
}
