//! Requests the relay itself puts to the host (the embedded requests of an `input_required`
//! result, asked of a legacy host as real `elicitation/create`, `sampling/createMessage` and
//! `roots/list` requests), and the host's answers to them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::jsonrpc::message::IdKey;
use crate::jsonrpc::writer::Outbox;

#[derive(Default)]
pub struct HostRequests {
    waiting: Mutex<HashMap<IdKey, oneshot::Sender<Vec<u8>>>>,
    next: AtomicU64,
}

/// Forgets an unanswered request when its asker goes away (the call was cancelled, or
/// timed out), and tells the host to stop working on it.
struct Pending<'a> {
    requests: &'a HostRequests,
    id: IdKey,
    raw_id: String,
    out: Outbox,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let was_waiting = self
            .requests
            .waiting
            .lock()
            .expect("input lock")
            .remove(&self.id)
            .is_some();
        if was_waiting {
            let line = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the call it belonged to ended"}}}}"#,
                self.raw_id
            );
            let out = self.out.clone();
            tokio::spawn(async move {
                out.send(line.into_bytes()).await;
            });
        }
    }
}

#[derive(Deserialize)]
struct Answer {
    result: Option<Value>,
    error: Option<ErrorObject>,
}

#[derive(Deserialize)]
struct ErrorObject {
    message: Option<String>,
}

impl HostRequests {
    /// Hands the host's answer to whoever asked; false if the id is not one of ours.
    pub fn answer(&self, id: &IdKey, line: Vec<u8>) -> bool {
        let waiter = self.waiting.lock().expect("input lock").remove(id);
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(line);
                true
            }
            None => false,
        }
    }

    /// Asks the host `method` and waits up to `timeout` for its result. `Err` says, in a
    /// sentence, why there is none (the host answered with an error, or never answered).
    pub async fn ask(
        &self,
        out: &Outbox,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = IdKey::Str(format!("mcp-stdio-input-{n}"));
        let raw_id = format!("\"mcp-stdio-input-{n}\"");
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .expect("input lock")
            .insert(id.clone(), tx);
        let _pending = Pending {
            requests: self,
            id,
            raw_id: raw_id.clone(),
            out: out.clone(),
        };
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"method":{},"params":{}}}"#,
            serde_json::to_string(method).expect("a string serializes"),
            serde_json::to_string(params).expect("JSON serializes"),
        );
        if !out.send(line.into_bytes()).await {
            return Err("the host is gone".into());
        }
        let answer = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => return Err(format!("the host never answered {method}")),
            Err(_) => {
                return Err(format!(
                    "the host did not answer {method} within {} s (--input-timeout)",
                    timeout.as_secs()
                ));
            }
        };
        match serde_json::from_slice::<Answer>(&answer) {
            Ok(Answer {
                result: Some(result),
                ..
            }) => Ok(result),
            Ok(Answer {
                error: Some(error), ..
            }) => Err(format!(
                "the host refused {method}: {}",
                error.message.unwrap_or_else(|| "no reason given".into())
            )),
            _ => Err(format!("the host's answer to {method} is malformed")),
        }
    }
}
