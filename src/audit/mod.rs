//! The audit log: one JSON line per operation (`record.rs`), written by a thread of its
//! own (`writer.rs`) from a bounded queue. No line is ever dropped: when the queue is full
//! a new request waits for room or is refused, as `--audit-when-full` says (both counted),
//! and a line that finds no room waits for it; an operation dropped before its end is
//! written as `cancelled`. Shared by `serve` and the relay; knows nothing of either.

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
    /// Lines handed to the queue.
    pub queued: AtomicU64,
}

/// The running audit log.
#[derive(Debug)]
pub struct Auditor {
    lines: mpsc::Sender<Record>,
    pub settings: Settings,
    pub stats: Arc<Stats>,
}

/// Something else told how an operation ended, with the same facts as its line (an
/// OpenTelemetry span and its metric).
pub trait Observer: Send {
    fn ended(self: Box<Self>, record: &Record, duration: std::time::Duration);
}

/// An operation in flight and its line. Ended by `finish`, or, if it is dropped first (the
/// client went away), as `cancelled`: either way its line is written, once, and its
/// observer told.
pub struct Pending {
    /// The audit queue; `None` when only an observer wants the facts.
    lines: Option<(mpsc::Sender<Record>, Arc<Stats>)>,
    observer: Option<Box<dyn Observer>>,
    pub record: Record,
    started: std::time::Instant,
    ended: bool,
}

impl Pending {
    /// An operation with no audit line (an observer may still want its end).
    pub fn unlogged(record: Record) -> Pending {
        Pending {
            lines: None,
            observer: None,
            record,
            started: std::time::Instant::now(),
            ended: false,
        }
    }

    /// Tells `observer` too when the operation ends.
    pub fn observed_by(mut self, observer: Box<dyn Observer>) -> Pending {
        self.observer = Some(observer);
        self
    }

    /// The operation is over: its line, with its duration, goes to the queue.
    pub fn finish(mut self) {
        self.ended = true;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.ended && self.record.outcome != Outcome::Refused {
            self.record.outcome = Outcome::Cancelled;
        }
        let took = self.started.elapsed();
        self.record.duration_ms = took.as_secs_f64() * 1000.0;
        if let Some(observer) = self.observer.take() {
            observer.ended(&self.record, took);
        }
        let Some((lines, stats)) = &self.lines else {
            return;
        };
        let record = std::mem::replace(&mut self.record, Record::blank());
        stats.queued.fetch_add(1, Ordering::Relaxed);
        match lines.try_send(record) {
            Ok(()) => {}
            // The queue is full: the line waits for room on a task of its own (the
            // operation it belongs to is over), so it is late, never lost.
            Err(mpsc::error::TrySendError::Full(record)) => {
                stats.waited.fetch_add(1, Ordering::Relaxed);
                let lines = lines.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(async move {
                            let _ = lines.send(record).await;
                        });
                    }
                    Err(_) => {
                        let _ = lines.blocking_send(record);
                    }
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                stats.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
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

    /// Whether a request may start now. With room in the queue, at once; without, as
    /// `--audit-when-full` says: `refuse` says no; `wait` waits for room when `may_wait`
    /// (the relay's reading of the host must never block: its request goes on, and its
    /// line waits instead). No place is held while the request runs.
    pub async fn admit(&self, may_wait: bool) -> Result<(), Full> {
        if self.lines.capacity() > 0 {
            return Ok(());
        }
        match self.settings.when_full {
            WhenFull::Refuse => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                Err(Full)
            }
            WhenFull::Wait => {
                self.stats.waited.fetch_add(1, Ordering::Relaxed);
                if may_wait {
                    let room = self.lines.reserve().await.map_err(|_| Full)?;
                    drop(room);
                }
                Ok(())
            }
        }
    }

    /// The line of an operation that starts now.
    pub fn pending(&self, record: Record) -> Pending {
        Pending {
            lines: Some((self.lines.clone(), self.stats.clone())),
            observer: None,
            record,
            started: std::time::Instant::now(),
            ended: false,
        }
    }

    /// At exit: waits (at most `within`) until every line queued so far is written.
    pub async fn settle(&self, within: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + within;
        let stats = &self.stats;
        while tokio::time::Instant::now() < deadline {
            let done = stats.written.load(Ordering::Relaxed) + stats.lost.load(Ordering::Relaxed);
            if done >= stats.queued.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        tracing::warn!("the audit log's last lines were not all written before exit");
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
