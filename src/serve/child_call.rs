//! A call on a child session: the events that answer it, and the guard that tells the
//! child to stop (`notifications/cancelled`) when its client goes away unanswered. The
//! 2026-07-28 endpoint sends them; a parked `input_required` round keeps one.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use serde_json::json;
use tokio::sync::mpsc;

use super::backend::Event;
use super::session::Session;
use crate::jsonrpc::message::IdKey;

/// A call in the child: its events, and the guard that cancels it if nobody answers.
pub struct ChildCall {
    pub guard: InFlight,
    pub rx: mpsc::Receiver<Event>,
}

/// A call sent to the child: if the client goes away before the answer, the child is told
/// to stop (`notifications/cancelled`) and the answer, when it comes, is dropped.
pub struct InFlight {
    pub session: Arc<Session>,
    pub key: IdKey,
    pub upstream_id: String,
    pub answered: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.busy.fetch_sub(1, Ordering::Relaxed);
        self.session.touch();
        if self.answered {
            return;
        }
        // The cancellation first: an aggregate backend still knows then which server runs
        // the call.
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": self.upstream_id, "reason": "the client closed the stream"}});
        self.session
            .backend
            .send_now(Bytes::from(cancel.to_string()));
        self.session.backend.forget(&self.key);
        tracing::debug!(id = %self.upstream_id, "a 2026-07-28 client's call ended unanswered; cancelled in the child");
    }
}
