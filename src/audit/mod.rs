//! The audit log: one JSON line per operation (`record.rs`), written by a thread of its
//! own (`writer.rs`) from a bounded queue. A request takes its line's place in the queue
//! before it starts, so no line is ever dropped: when the queue is full the operator's
//! `--audit-when-full` either makes the request wait for room or refuses it, and both are
//! counted. Shared by `serve` and the relay; knows nothing of either.

mod record;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

pub use record::{Outcome, Record, digest, redacted, timestamp};
pub use writer::Sink;

/// What to do when the writer cannot keep up and the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// The request waits for room (slower, nothing refused).
    Wait,
    /// The request is refused at once (nothing waits, nothing unaudited runs).
    Refuse,
}

/// `--audit-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub sink: Sink,
    /// Lines waiting for the writer, at most (`--audit-queue`).
    pub queue: usize,
    pub when_full: WhenFull,
    /// Record the arguments' values, redacted (`--audit-arguments`).
    pub arguments: bool,
}

/// What the audit log has done, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub written: AtomicU64,
    /// Requests that waited for room in the queue.
    pub waited: AtomicU64,
    /// Requests refused because the queue was full.
    pub refused: AtomicU64,
    /// Lines the sink would not take (a full disk): logged as errors, never silent.
    pub lost: AtomicU64,
}

/// The running audit log.
#[derive(Debug)]
pub struct Auditor {
    lines: mpsc::Sender<Record>,
    pub settings: Settings,
    pub stats: Arc<Stats>,
}

/// A line's place in the queue, taken before the operation starts.
pub struct Slot {
    permit: mpsc::OwnedPermit<Record>,
}

impl Slot {
    /// Queues the line (it cannot fail: its place was taken).
    pub fn write(self, record: Record) {
        self.permit.send(record);
    }
}

/// An operation in flight: its line, its place in the queue, and when it began.
pub struct Pending {
    slot: Slot,
    pub record: Record,
    started: std::time::Instant,
}

impl Pending {
    pub fn new(slot: Slot, record: Record) -> Self {
        Pending {
            slot,
            record,
            started: std::time::Instant::now(),
        }
    }

    /// The operation is over: its line, with its duration, goes to the queue.
    pub fn finish(mut self) {
        self.record.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        self.slot.write(self.record);
    }
}

/// The queue was full and `--audit-when-full refuse` is set.
#[derive(Debug)]
pub struct Full;

impl Auditor {
    /// Opens the sink (a file that cannot be opened is an error now, not lines lost
    /// later) and starts its writer.
    pub fn start(settings: Settings) -> Result<Arc<Auditor>, String> {
        writer::check(&settings.sink)?;
        let (lines, queued) = mpsc::channel(settings.queue.max(1));
        let stats = Arc::new(Stats::default());
        let sink = settings.sink.clone();
        let writing = stats.clone();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || writer::run(sink, queued, writing))
            .map_err(|e| format!("cannot start the audit log's writer: {e}"))?;
        Ok(Arc::new(Auditor {
            lines,
            settings,
            stats,
        }))
    }

    /// A place for one line: at once if there is room, else as `--audit-when-full` says.
    pub async fn slot(&self) -> Result<Slot, Full> {
        match self.lines.clone().try_reserve_owned() {
            Ok(permit) => Ok(Slot { permit }),
            Err(mpsc::error::TrySendError::Full(sender)) => match self.settings.when_full {
                WhenFull::Refuse => {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    Err(Full)
                }
                WhenFull::Wait => {
                    self.stats.waited.fetch_add(1, Ordering::Relaxed);
                    sender
                        .reserve_owned()
                        .await
                        .map(|permit| Slot { permit })
                        .map_err(|_| Full)
                }
            },
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Full),
        }
    }

    /// The `/metrics` lines of the audit log.
    pub fn metrics(&self) -> String {
        let stats = &self.stats;
        format!(
            "# HELP mcp_stdio_audit_lines_total Audit lines written.\n# TYPE mcp_stdio_audit_lines_total counter\nmcp_stdio_audit_lines_total {}\n\
             # HELP mcp_stdio_audit_waits_total Requests that waited for room in the audit queue (--audit-when-full wait).\n# TYPE mcp_stdio_audit_waits_total counter\nmcp_stdio_audit_waits_total {}\n\
             # HELP mcp_stdio_audit_refused_total Requests refused because the audit queue was full (--audit-when-full refuse).\n# TYPE mcp_stdio_audit_refused_total counter\nmcp_stdio_audit_refused_total {}\n\
             # HELP mcp_stdio_audit_lost_total Audit lines the sink would not take (each logged as an error).\n# TYPE mcp_stdio_audit_lost_total counter\nmcp_stdio_audit_lost_total {}\n",
            stats.written.load(Ordering::Relaxed),
            stats.waited.load(Ordering::Relaxed),
            stats.refused.load(Ordering::Relaxed),
            stats.lost.load(Ordering::Relaxed),
        )
    }
}
