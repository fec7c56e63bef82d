//! Warm spare children (`--spare-children N`): processes of the same command, started ahead
//! and waiting on their stdin, so a new session (or a new principal's pooled backend) takes
//! one that has already loaded and its client's `initialize` goes to it at once, instead of
//! waiting for a process to start. Spares are ordinary unused children: nothing has been
//! said to them, so no state passes from one session to another. They count against
//! `--max-sessions`; one that dies is replaced.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use super::Gateway;
use super::child::{Child, Output};

/// How often idle spares are checked for having died (a spare that exits says nothing
/// else: it has no session to fail).
const SWEEP: Duration = Duration::from_secs(1);

/// A started child nobody uses yet, with its stdout's channel.
pub struct Spare {
    pub child: Child,
    pub output: mpsc::Receiver<Output>,
}

pub struct Spares {
    want: usize,
    idle: Mutex<VecDeque<Spare>>,
    /// Wakes the keeper: a spare was taken, or a session ended and made room.
    changed: Notify,
    /// Spares started so far (each gets a number for its stderr name).
    started: AtomicU64,
}

impl Spares {
    pub fn new(want: usize) -> Self {
        Spares {
            want,
            idle: Mutex::new(VecDeque::new()),
            changed: Notify::new(),
            started: AtomicU64::new(0),
        }
    }

    /// Spares ready now.
    pub fn count(&self) -> usize {
        self.idle.lock().expect("spares lock").len()
    }

    /// A ready spare, if one is alive (dead ones found on the way are dropped, which
    /// kills what is left of them).
    pub fn take(&self) -> Option<Spare> {
        if self.want == 0 {
            return None;
        }
        let mut idle = self.idle.lock().expect("spares lock");
        let taken = loop {
            let mut spare = idle.pop_front()?;
            if !spare.child.has_exited() && !spare.output.is_closed() {
                break spare;
            }
        };
        drop(idle);
        self.changed.notify_one();
        Some(taken)
    }

    /// Room for a spare may have opened (a session ended).
    pub fn room(&self) {
        if self.want > 0 {
            self.changed.notify_one();
        }
    }

    /// The keeper: keeps `want` spares started while `--max-sessions` leaves room, replaces
    /// dead ones, and ends them all when serve stops or drains.
    pub async fn keep(gateway: Arc<Gateway>) {
        let spares = &gateway.spares;
        if spares.want == 0 {
            return;
        }
        loop {
            if gateway.closing.is_cancelled() || gateway.draining.is_cancelled() {
                break;
            }
            spares.sweep();
            spares.fill(&gateway);
            tokio::select! {
                _ = spares.changed.notified() => {}
                _ = tokio::time::sleep(SWEEP) => {}
                _ = gateway.closing.cancelled() => break,
                _ = gateway.draining.cancelled() => break,
            }
        }
        spares.end_all(gateway.config.child_grace).await;
    }

    /// Drops spares that have exited.
    fn sweep(&self) {
        let mut idle = self.idle.lock().expect("spares lock");
        let before = idle.len();
        idle.retain_mut(|spare| !spare.child.has_exited() && !spare.output.is_closed());
        if idle.len() < before {
            tracing::warn!(
                died = before - idle.len(),
                "a spare child exited before any session used it; starting another"
            );
        }
    }

    /// Starts spares until there are `want`, or sessions and spares reach `--max-sessions`.
    fn fill(&self, gateway: &Gateway) {
        let config = &gateway.config;
        loop {
            let idle = self.count();
            if idle >= self.want || gateway.sessions.count() + idle >= config.max_sessions {
                return;
            }
            let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
            let (output_tx, output) = mpsc::channel(256);
            let child = match Child::spawn(
                &config.command,
                &format!("spare-{number}"),
                config.max_message_size,
                config.child_queue,
                output_tx,
            ) {
                Ok(child) => child,
                Err(e) => {
                    // Sessions will say so too when they try; retried at the next sweep.
                    tracing::warn!("cannot start a spare `{}`: {e}", config.command.program());
                    return;
                }
            };
            tracing::info!(
                spare = number,
                pid = child.id().unwrap_or(0),
                "spare child started"
            );
            self.idle
                .lock()
                .expect("spares lock")
                .push_back(Spare { child, output });
        }
    }

    /// Ends every idle spare (as a session's child is ended) and waits until they are gone.
    pub async fn end_all(&self, grace: Duration) {
        let spares: Vec<Spare> = self.idle.lock().expect("spares lock").drain(..).collect();
        let endings = spares.into_iter().map(|spare| spare.child.terminate(grace));
        futures_util::future::join_all(endings).await;
    }
}
