//! Calls to a legacy server that wait for a modern host's input. A legacy server asks its
//! questions (elicitation, sampling, roots) as requests in the middle of a call; a
//! 2026-07-28 host can only be asked through an `input_required` result and answers by
//! retrying. So the relay keeps the upstream call open (parked), answers the host with the
//! question and a `requestState` naming the parked call, and resumes it on the retry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::gate::Failure;
use crate::era::state_token;

/// A request the legacy server made during a call.
#[derive(Debug)]
pub struct ServerRequest {
    /// Its id as the server wrote it, for the answer.
    pub raw_id: String,
    pub method: String,
    pub params: Value,
}

/// An upstream call in progress: its questions as they come, and its final answer.
pub struct Flight {
    pub questions: mpsc::UnboundedReceiver<ServerRequest>,
    pub answer: oneshot::Receiver<Result<Vec<u8>, Failure>>,
    pub task: AbortHandle,
    /// The id the call was sent upstream under (for `notifications/cancelled`).
    pub upstream_raw_id: String,
}

impl Drop for Flight {
    fn drop(&mut self) {
        // Nobody will read the answer: stop reading the upstream's stream.
        self.task.abort();
    }
}

/// A parked call: the flight and the question the host was asked.
pub struct ParkedCall {
    pub flight: Flight,
    pub question: ServerRequest,
}

pub struct Parked {
    /// Made on first use: starting the crypto library costs tens of milliseconds, which
    /// every relay would otherwise pay at startup.
    key: std::sync::OnceLock<[u8; 32]>,
    calls: Mutex<HashMap<u64, ParkedCall>>,
    next: AtomicU64,
}

impl Default for Parked {
    fn default() -> Self {
        Self {
            key: std::sync::OnceLock::new(),
            calls: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        }
    }
}

impl Parked {
    fn key(&self) -> &[u8; 32] {
        self.key.get_or_init(|| {
            let mut key = [0u8; 32];
            aws_lc_rs::rand::fill(&mut key).expect("the system random generator works");
            key
        })
    }

    /// Parks a call; returns its number and the `requestState` the host must echo.
    pub fn park(&self, call: ParkedCall, method: &str, name: Option<&str>) -> (u64, String) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.calls.lock().expect("parked lock").insert(id, call);
        (id, state_token::sign(self.key(), id, method, name))
    }

    /// Takes the parked call a retry's `requestState` names, if it is genuine, for this
    /// method and name, and still parked (each state resumes a call once).
    pub fn resume(&self, state: &str, method: &str, name: Option<&str>) -> Option<ParkedCall> {
        let id = state_token::verify(self.key(), state, method, name)?;
        self.calls.lock().expect("parked lock").remove(&id)
    }

    /// Takes a parked call that was never resumed (its time is up).
    pub fn expire(&self, id: u64) -> Option<ParkedCall> {
        self.calls.lock().expect("parked lock").remove(&id)
    }

    pub fn count(&self) -> usize {
        self.calls.lock().expect("parked lock").len()
    }
}
