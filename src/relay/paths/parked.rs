//! Calls to a legacy server that wait for a modern host's input. A legacy server asks its
//! questions (elicitation, sampling, roots) as requests in the middle of a call; a
//! 2026-07-28 host can only be asked through an `input_required` result and answers by
//! retrying. So the relay keeps the upstream call open (parked), answers the host with the
//! question and a `requestState` naming the parked call, and resumes it on the retry.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::relay::gate::Failure;

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

/// The relay's parked calls (its host has no principal).
pub type Parked = crate::parking::Parked<ParkedCall>;
