//! `subscriptions/listen` for 2026-07-28 clients of a handshake-era child (§4.11): the
//! gateway acknowledges what the child can deliver, subscribes the child to the asked
//! resources (once per URI, however many clients listen), and streams the child's change
//! notifications that match, and the status changes of the caller's tasks it names
//! (`taskIds`, the tasks extension), tagged with the listen's id. Closing the stream ends the
//! subscription; at shutdown the listen gets its graceful result.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use super::gateway::Gateway;
use super::params::ask;
use super::pool::Backend;
use super::responses::{json_error, sse_body, sse_event};
use crate::era::listen::{self, Filter};
use crate::jsonrpc::error::INVALID_PARAMS;

pub async fn serve(
    gateway: &Arc<Gateway>,
    backend: &Arc<Backend>,
    principal: Option<&str>,
    raw_id: &str,
    params: &Map<String, Value>,
) -> Response<Body> {
    let Some(asked) = params.get("notifications").filter(|n| n.is_object()) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            raw_id,
            INVALID_PARAMS,
            "subscriptions/listen needs params.notifications, e.g. {\"toolsListChanged\": true, \"resourceSubscriptions\": [\"file:///x\"]}",
        );
    };
    let capabilities = backend
        .initialize
        .get("capabilities")
        .cloned()
        .unwrap_or_default();
    let mut filter = Filter::agreed(asked, &capabilities);
    // Status changes of the caller's own tasks (held by the gateway for this child).
    filter.task_ids = Filter::asked_task_ids(asked)
        .filter(|id| gateway.tasks.get(id, principal).is_some())
        .map(str::to_owned)
        .collect();
    // Listen before subscribing, so no update that follows a subscription is missed.
    let changes = backend.session.events.changes.subscribe();
    let mut subscribed = Subscribed {
        gateway: gateway.clone(),
        backend: backend.clone(),
        uris: Vec::new(),
    };
    for uri in std::mem::take(&mut filter.uris) {
        if subscribed.add(&uri).await {
            filter.uris.insert(uri);
        }
    }
    let id: Value = serde_json::from_str(raw_id).unwrap_or(Value::Null);
    backend.session.busy.fetch_add(1, Ordering::Relaxed);
    let ack = listen::acknowledgement(&id, &filter);
    let state = Listening {
        _subscribed: subscribed,
        changes,
        filter,
        id,
        first: Some(ack),
    };
    let farewell = sse_event(None, &listen::end(&state.id));
    let ended = backend.session.ended.clone();
    let source = futures_util::stream::unfold(state, move |mut state| {
        let ended = ended.clone();
        async move {
            if let Some(ack) = state.first.take() {
                return Some((sse_event(None, &ack), state));
            }
            loop {
                let line = tokio::select! {
                    line = state.changes.recv() => line,
                    // The child is gone: an unexpected drop, so the client re-listens.
                    _ = ended.cancelled() => return None,
                };
                match line {
                    Ok(line) => {
                        if let Some(event) = state.deliver(&line) {
                            return Some((sse_event(None, &event), state));
                        }
                    }
                    // Missed notifications: end without the result, so the client
                    // re-listens and refetches what it caches.
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(
                            missed,
                            "a subscriptions/listen stream fell behind; ending it so the client resyncs"
                        );
                        return None;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    // A graceful end at shutdown: the listen's result.
    sse_body(source, gateway.sse_timing(), || {}, Some(farewell))
}

struct Listening {
    /// Held for its drop: the child's subscriptions are released when the stream ends.
    _subscribed: Subscribed,
    changes: broadcast::Receiver<Bytes>,
    filter: Filter,
    id: Value,
    first: Option<Vec<u8>>,
}

impl Listening {
    /// The notification as this subscription delivers it, if it asked for it.
    fn deliver(&self, line: &[u8]) -> Option<Vec<u8>> {
        let value: Value = serde_json::from_slice(line).ok()?;
        let method = value.get("method")?.as_str()?;
        let params = value.get("params");
        self.filter
            .wants(method, params)
            .then(|| listen::tagged(method, params, &self.id))
    }
}

/// The child's resource subscriptions one listen holds; released when it ends.
struct Subscribed {
    gateway: Arc<Gateway>,
    backend: Arc<Backend>,
    uris: Vec<String>,
}

impl Subscribed {
    /// Subscribes the child to `uri` unless another listen already did.
    async fn add(&mut self, uri: &str) -> bool {
        let first = {
            let mut counts = self
                .backend
                .resource_listeners
                .lock()
                .expect("listeners lock");
            let count = counts.entry(uri.to_owned()).or_default();
            *count += 1;
            *count == 1
        };
        let ok =
            !first || subscribe(&self.gateway, &self.backend, "resources/subscribe", uri).await;
        if ok {
            self.uris.push(uri.to_owned());
        } else {
            release(&self.backend, uri);
        }
        ok
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        self.backend.session.busy.fetch_sub(1, Ordering::Relaxed);
        self.backend.session.touch();
        let last: Vec<String> = self
            .uris
            .iter()
            .filter(|uri| release(&self.backend, uri))
            .cloned()
            .collect();
        if last.is_empty() {
            return;
        }
        let gateway = self.gateway.clone();
        let backend = self.backend.clone();
        tokio::spawn(async move {
            for uri in last {
                subscribe(&gateway, &backend, "resources/unsubscribe", &uri).await;
            }
        });
    }
}

/// Drops one listener of `uri`; true if it was the last.
fn release(backend: &Backend, uri: &str) -> bool {
    let mut counts = backend.resource_listeners.lock().expect("listeners lock");
    let Some(count) = counts.get_mut(uri) else {
        return false;
    };
    *count -= 1;
    if *count == 0 {
        counts.remove(uri);
        return true;
    }
    false
}

async fn subscribe(gateway: &Arc<Gateway>, backend: &Backend, method: &str, uri: &str) -> bool {
    let mut params = Map::new();
    params.insert("uri".into(), uri.into());
    ask(gateway, backend, method, params).await.is_some()
}
