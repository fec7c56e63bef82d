//! A call to a legacy server that may ask the modern host something (a `UpstreamCall`): what the
//! `input_required` rounds of `crate::parking` park while the host is asked.

use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::parking::{Question, Rounds};
use crate::relay::gate::Failure;

/// An upstream call in progress: its questions as they come, and its final answer.
pub struct UpstreamCall {
    pub questions: mpsc::UnboundedReceiver<Question>,
    pub answer: oneshot::Receiver<Result<Vec<u8>, Failure>>,
    pub task: AbortHandle,
    /// The id the call was sent upstream under (for `notifications/cancelled`).
    pub upstream_raw_id: String,
}

impl Drop for UpstreamCall {
    fn drop(&mut self) {
        // Nobody will read the answer: stop reading the upstream's stream.
        self.task.abort();
    }
}

/// The relay's calls waiting for the host's retry (its host has no principal).
pub type Parked = Rounds<UpstreamCall>;
