//! `subscriptions/listen` for a 2026-07-28 host in front of a legacy server, served by the
//! relay itself: the acknowledgement lists what the server can deliver, resources are
//! subscribed upstream, and the session's notifications are tagged for each subscription.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;

use super::modern_host::{ModernHost, Subscription, ToLegacy};
use crate::era::listen::{self, Filter};
use crate::era::request::request_line;
use crate::jsonrpc::message::IdKey;
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::gate::Failure;
use crate::relay::link::session::Wire;
use crate::relay::request::Call;

/// Hands a server notification to the host's matching subscriptions, tagged with each one's id.
pub fn send_to_subscriptions(
    host: &ModernHost,
    out: &crate::jsonrpc::writer::Outbox,
    method: &str,
    params: Option<&RawValue>,
) {
    let params = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
    let lines = host.for_subscriptions(method, params.as_ref());
    if lines.is_empty() {
        tracing::debug!(%method, "dropped a server notification no subscription asked for");
        return;
    }
    let out = out.clone();
    tokio::spawn(async move {
        for line in lines {
            out.send(line).await;
        }
    });
}

/// Removes a subscription when its request ends (cancelled by the host, or shutdown).
struct Subscribed<'a> {
    host: &'a ModernHost,
    id: IdKey,
}

impl Drop for Subscribed<'_> {
    fn drop(&mut self) {
        self.host
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .remove(&self.id);
    }
}

/// Serves the host's `subscriptions/listen` from the session's own notifications: the
/// acknowledgement lists what this server can deliver, then the stream stays open until
/// the host cancels it or the relay shuts down.
pub async fn listen(
    path: &Arc<ToLegacy>,
    request: &Call,
    params: Option<&RawValue>,
    initialize: &Value,
) -> Result<(), Failure> {
    let params: Value = params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_default();
    let asked = params.get("notifications").cloned().unwrap_or_default();
    let caps = initialize.get("capabilities").cloned().unwrap_or_default();
    let mut filter = Filter::agreed(&asked, &caps);
    let mut uris = Vec::new();
    for uri in std::mem::take(&mut filter.uris) {
        if subscribe_upstream(path, "resources/subscribe", &uri).await {
            uris.push(uri);
        }
    }
    filter.uris = uris.iter().cloned().collect();
    let subscription_id: Value = serde_json::from_str(&request.raw_id).unwrap_or(Value::Null);
    let ack = listen::acknowledgement(&subscription_id, &filter);
    let subscription = Subscription {
        raw_id: request.raw_id.clone(),
        filter,
    };
    path.host
        .subscriptions
        .lock()
        .expect("subscriptions lock")
        .insert(request.id.clone(), subscription);
    let _subscribed = Subscribed {
        host: &path.host,
        id: request.id.clone(),
    };
    path.ctx.gate.outbox().send(ack).await;
    path.ctx.closing.cancelled().await;
    for uri in &uris {
        subscribe_upstream(path, "resources/unsubscribe", uri).await;
    }
    path.ctx
        .gate
        .deliver(&request.id, listen::end(&subscription_id))
        .await;
    Ok(())
}

async fn subscribe_upstream(path: &ToLegacy, method: &str, uri: &str) -> bool {
    let id = path.ctx.next_upstream_id("subscribe");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let mut params = serde_json::Map::new();
    params.insert("uri".into(), uri.into());
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, method, &params)),
        id: &IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Legacy { initialize: false },
        replay_safe: true,
    };
    match call(&path.ctx, outgoing, &mut |_, _| Aside::Ignore).await {
        Ok(answer) => crate::relay::link::response::error_code(&answer).is_none(),
        Err(failure) => {
            tracing::debug!(problem = %failure.message, %method, "a subscription request failed");
            false
        }
    }
}
