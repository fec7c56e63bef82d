//! The pending table and emit gate: every answer to the host passes here, so each request
//! id gets exactly one response (or none, if the host cancelled it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::cancel::CancelTracker;
use crate::audit::{Auditor, Full, Pending, Record};
use crate::jsonrpc::error::{error_response, with_error_object};
use crate::jsonrpc::message::IdKey;
use crate::jsonrpc::writer::Outbox;

/// Where a request's answer goes: stdout, or the collector of the batch it came in.
pub enum Sink {
    Stdout,
    /// `Some(answer)`, or `None` when the request was cancelled and will have no answer.
    Batch(mpsc::UnboundedSender<Option<Vec<u8>>>),
}

struct Slot {
    /// The id exactly as the host wrote it, for synthesized answers.
    raw_id: String,
    sink: Sink,
    task: Option<AbortHandle>,
    /// Its audit line, with `--audit-log`.
    audit: Option<Pending>,
}

/// Ends an audit line with the answer the host got (`None`: it was cancelled).
fn audited(audit: Option<Pending>, answer: Option<&[u8]>) {
    let Some(mut pending) = audit else { return };
    match answer {
        Some(line) => pending.record.answered(line),
        None => pending.record.outcome = crate::audit::Outcome::Cancelled,
    }
    pending.finish();
}

/// An error the relay answers with when the upstream could not.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: i64,
    pub message: String,
    pub data: Option<serde_json::Value>,
}

impl Failure {
    pub fn upstream(message: impl Into<String>) -> Self {
        Self {
            code: crate::jsonrpc::error::UPSTREAM_ERROR,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// How a registration went.
#[derive(Debug, PartialEq, Eq)]
pub enum Registered {
    Ok,
    /// The id is already waiting for an answer.
    Duplicate,
    /// `--max-in-flight` requests are already waiting.
    Full,
}

pub struct Gate {
    out: Outbox,
    filter_cancelled: bool,
    max_in_flight: usize,
    slots: Mutex<HashMap<IdKey, Slot>>,
    cancelled: Mutex<CancelTracker>,
    /// Where upstream messages other than answers go instead of stdout, when set.
    diverted: std::sync::OnceLock<mpsc::Sender<Vec<u8>>>,
    /// Told whenever a slot is taken, so shutdown can wait for the last answer.
    taken: tokio::sync::Notify,
    /// `--audit-log`: the log, and the upstream as its lines name it.
    audit: Option<(Arc<Auditor>, String)>,
    /// The host's `name/version`, from its `initialize`.
    host: Mutex<Option<String>>,
}

impl Gate {
    pub fn new(
        out: Outbox,
        filter_cancelled: bool,
        cancel_ttl: Duration,
        max_in_flight: usize,
    ) -> Self {
        Self {
            out,
            filter_cancelled,
            max_in_flight,
            slots: Mutex::new(HashMap::new()),
            cancelled: Mutex::new(CancelTracker::new(cancel_ttl, max_in_flight.max(256) * 4)),
            diverted: std::sync::OnceLock::new(),
            taken: tokio::sync::Notify::new(),
            audit: None,
            host: Mutex::new(None),
        }
    }

    /// Writes an audit line per host request to `auditor`, naming the upstream `server`.
    pub fn with_audit(mut self, auditor: Arc<Auditor>, server: String) -> Self {
        self.audit = Some((auditor, server));
        self
    }

    /// At exit: the audit log's queued lines written (at most two seconds).
    pub async fn settle_audit(&self) {
        if let Some((auditor, _)) = &self.audit {
            auditor.settle(Duration::from_secs(2)).await;
        }
    }

    /// The audit line of a host request (none without `--audit-log`), its place in the
    /// queue taken, and its OpenTelemetry span's context (none when that is off); `Err`
    /// when the queue is full and `--audit-when-full refuse` is set.
    pub async fn audit(
        &self,
        method: &str,
        raw_id: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Result<(Option<Pending>, Option<opentelemetry::Context>), Full> {
        if self.audit.is_none() && crate::telemetry::installed().is_none() {
            return Ok((None, None));
        }
        let params: serde_json::Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let client = {
            let mut host = self.host.lock().expect("host lock");
            if let Some(info) = params.get("clientInfo").filter(|_| method == "initialize") {
                let text = |key| {
                    info.get(key)
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default()
                };
                *host = Some(format!("{}/{}", text("name"), text("version")));
            }
            host.clone()
        };
        let parent = crate::trace_context::TraceContext::from_meta(&params);
        let with_values = self
            .audit
            .as_ref()
            .is_some_and(|(auditor, _)| auditor.settings.arguments);
        let mut record = Record::of_request(method, raw_id, params, with_values);
        record.client = client;
        let pending = match &self.audit {
            Some((auditor, server)) => {
                record.server = Some(server.clone());
                // Never waits: this runs in the loop that reads the host.
                auditor.admit(false).await?;
                auditor.pending(record)
            }
            None => Pending::unlogged(record),
        };
        let Some(operation) =
            crate::telemetry::Operation::start(&pending.record, parent.as_ref(), None)
        else {
            return Ok((Some(pending), None));
        };
        let context = operation.context();
        let mut pending = pending.observed_by(Box::new(operation));
        // The line names the trace this request is in: the relay's span's.
        if let Some(id) = crate::telemetry::trace_id_of(&context) {
            pending.record.trace_id = Some(id);
        }
        Ok((Some(pending), Some(context)))
    }

    /// Waits until no request waits for an answer (over HTTP+SSE the answers come after
    /// the requests' tasks have ended, so shutdown waits for them here).
    pub async fn drained(&self) {
        loop {
            let taken = self.taken.notified();
            if self.in_flight() == 0 {
                return;
            }
            taken.await;
        }
    }

    /// Takes `id`'s slot, telling whoever waits for the gate to drain.
    fn take(&self, id: &IdKey) -> Option<Slot> {
        let slot = self.slots.lock().expect("gate lock").remove(id);
        if slot.is_some() {
            self.taken.notify_waiters();
        }
        slot
    }

    /// Sends upstream requests and notifications to `to` instead of stdout from now on.
    /// Returns false if they were already diverted.
    pub fn divert(&self, to: mpsc::Sender<Vec<u8>>) -> bool {
        self.diverted.set(to).is_ok()
    }

    /// Where upstream requests and notifications go, if not to stdout.
    pub fn diverted(&self) -> Option<&mpsc::Sender<Vec<u8>>> {
        self.diverted.get()
    }

    pub fn outbox(&self) -> &Outbox {
        &self.out
    }

    /// Starts waiting for the answer to `id` (`audit`: its audit line, ended with it).
    pub fn register(
        &self,
        id: IdKey,
        raw_id: &str,
        sink: Sink,
        audit: Option<Pending>,
    ) -> Registered {
        let mut slots = self.slots.lock().expect("gate lock");
        let refused = if slots.contains_key(&id) {
            Some(Registered::Duplicate)
        } else if slots.len() >= self.max_in_flight {
            Some(Registered::Full)
        } else {
            None
        };
        if let Some(refused) = refused {
            // The host is answered with an error: so says its line.
            if let Some(mut pending) = audit {
                pending.record.outcome = crate::audit::Outcome::ProtocolError;
                pending.record.error_code = Some(crate::jsonrpc::error::INVALID_REQUEST);
                pending.finish();
            }
            return refused;
        }
        self.cancelled.lock().expect("cancel lock").forget(&id);
        slots.insert(
            id,
            Slot {
                raw_id: raw_id.to_owned(),
                sink,
                task: None,
                audit,
            },
        );
        Registered::Ok
    }

    /// Remembers the task serving `id`, so a cancellation can abort its HTTP exchange.
    pub fn attach(&self, id: &IdKey, task: AbortHandle) {
        if let Some(slot) = self.slots.lock().expect("gate lock").get_mut(id) {
            slot.task = Some(task);
        }
    }

    /// Whether `id` still waits for its answer.
    pub fn is_waiting(&self, id: &IdKey) -> bool {
        self.slots.lock().expect("gate lock").contains_key(id)
    }

    pub fn in_flight(&self) -> usize {
        self.slots.lock().expect("gate lock").len()
    }

    /// Delivers an upstream answer for `id`. Returns false (and drops it) when nobody is
    /// waiting: the id was cancelled, already answered, or never asked.
    pub async fn deliver(&self, id: &IdKey, line: Vec<u8>) -> bool {
        let slot = self.take(id);
        match slot {
            Some(slot) => {
                audited(slot.audit, Some(&line));
                send(&self.out, slot.sink, Some(line)).await;
                true
            }
            None => {
                if self
                    .cancelled
                    .lock()
                    .expect("cancel lock")
                    .take(id, Instant::now())
                {
                    tracing::debug!(%id, "dropped the late answer to a cancelled request");
                } else {
                    tracing::warn!(%id, "dropped an upstream answer that matches no pending request");
                }
                false
            }
        }
    }

    /// Answers `id` with a synthesized error, unless it was already answered or cancelled.
    pub async fn fail(&self, id: &IdKey, failure: &Failure) {
        let slot = self.take(id);
        if let Some(slot) = slot {
            tracing::debug!(%id, message = %failure.message, "answering with a relay error");
            let line = error_response(
                &slot.raw_id,
                failure.code,
                &failure.message,
                failure.data.clone(),
            );
            audited(slot.audit, Some(&line));
            send(&self.out, slot.sink, Some(line)).await;
        }
    }

    /// Answers `id` with an upstream error object whose own id was unusable (`null`).
    pub async fn deliver_error_object(
        &self,
        id: &IdKey,
        error: &serde_json::value::RawValue,
    ) -> bool {
        let raw_id = match self.slots.lock().expect("gate lock").get(id) {
            Some(slot) => slot.raw_id.clone(),
            None => return false,
        };
        self.deliver(id, with_error_object(&raw_id, error)).await
    }

    /// The host cancelled `id`: stop its exchange and make sure nothing reaches the host
    /// for it. A no-op with `--no-cancel-filter` (the answer is then delivered as usual).
    pub async fn cancel(&self, id: &IdKey) {
        if !self.filter_cancelled {
            return;
        }
        let slot = self.take(id);
        let Some(slot) = slot else { return };
        self.cancelled
            .lock()
            .expect("cancel lock")
            .insert(id.clone(), Instant::now());
        if let Some(task) = slot.task {
            task.abort();
        }
        audited(slot.audit, None);
        send(&self.out, slot.sink, None).await;
    }

    /// Answers every request still waiting with `failure` (used at shutdown).
    pub async fn fail_all(&self, failure: &Failure) {
        let ids: Vec<IdKey> = self
            .slots
            .lock()
            .expect("gate lock")
            .keys()
            .cloned()
            .collect();
        for id in ids {
            self.fail(&id, failure).await;
        }
    }
}

async fn send(out: &Outbox, sink: Sink, line: Option<Vec<u8>>) {
    match (sink, line) {
        (Sink::Stdout, Some(line)) => {
            out.send(line).await;
        }
        (Sink::Stdout, None) => {}
        (Sink::Batch(tx), line) => {
            let _ = tx.send(line);
        }
    }
}
