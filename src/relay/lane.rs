//! The ordered lane for what the host sends that needs no answer: notifications, and its
//! answers to server-initiated requests. One POST at a time keeps them in the host's order.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::mpsc;

use super::Relay;

/// Queues messages for the lane. Bounded: a full lane slows the stdin reader down.
#[derive(Clone)]
pub struct Lane {
    tx: mpsc::Sender<Bytes>,
}

impl Lane {
    pub fn spawn(relay: Arc<Relay>, capacity: usize) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx }, tokio::spawn(drain(relay, rx)))
    }

    pub async fn push(&self, message: Bytes) {
        let _ = self.tx.send(message).await;
    }
}

async fn drain(relay: Arc<Relay>, mut rx: mpsc::Receiver<Bytes>) {
    while let Some(message) = rx.recv().await {
        deliver(&relay, message).await;
    }
}

/// POSTs one message that gets no answer. Failures are logged: there is nobody to answer.
pub async fn deliver(relay: &Relay, message: Bytes) -> bool {
    if relay.transports.is_sse()
        && let Some(relay) = relay.handle()
    {
        return super::sse_link::deliver(&relay, message).await;
    }
    for attempt in 0..2 {
        let posted = match relay.upstream.post(message.clone(), false, true).await {
            Ok(posted) => posted,
            Err(failure) => {
                tracing::warn!(problem = %failure.message, "could not deliver a notification or answer to the upstream");
                return false;
            }
        };
        let status = posted.response.status();
        if status == StatusCode::NOT_FOUND && posted.carried_session && attempt == 0 {
            if let Err(failure) = relay.upstream.reinitialize(posted.generation).await {
                tracing::warn!(problem = %failure.message, "could not re-establish the upstream session");
                return false;
            }
            relay.restart_server_stream();
            continue;
        }
        if status.is_success() {
            return true;
        }
        tracing::warn!(%status, "the upstream refused a notification or answer");
        return false;
    }
    false
}
