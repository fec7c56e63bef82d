//! Warm spare children (`--spare-children N`): processes of the same command, started ahead
//! and waiting on their stdin, so a new session (or a new principal's pooled backend) takes
//! one that has already loaded and its client's `initialize` goes to it at once, instead of
//! waiting for a process to start. Spares are ordinary unused children: nothing has been
//! said to them, so no state passes from one session to another. They count against
//! `--max-sessions`; one that dies is replaced.
//!
//! Under `--config` spares follow demand: a server keeps them only once it has been used
//! (or when its entry sets `spare_children`), ends them after `--spare-idle-ttl` without a
//! new session, and every server's spares together stay within the listener's
//! `--spare-budget` (each spare holds one permit of it), so a file of ten servers holds no
//! idle process before its first client.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use super::Gateway;
use super::child::{Child, Output};

/// How often idle spares are checked for having died (a spare that exits says nothing
/// else: it has no session to fail).
const SWEEP: Duration = Duration::from_secs(1);

/// A started child nobody uses yet, with its stdout's channel.
pub struct Spare {
    pub child: Child,
    pub output: mpsc::Receiver<Output>,
    /// Its share of the listener's `--spare-budget`, given back when it is taken or ends.
    _budget: Option<OwnedSemaphorePermit>,
}

/// When a server keeps spares, and how many.
#[derive(Debug, Clone)]
pub struct SparePolicy {
    /// Most spares the server keeps (`--spare-children`, or the entry's `spare_children`).
    pub most: usize,
    /// Kept from the start (plain `serve`, or an entry that sets `spare_children`), rather
    /// than once the server has been used.
    pub from_start: bool,
    /// `--spare-idle-ttl`: the spares of a server used on demand end after this long
    /// without a new session, until it is used again (`None`: never).
    pub idle_ttl: Option<Duration>,
    /// `--spare-budget`: the permits all servers of one listener share (`None`: unbounded
    /// but by `most`).
    pub budget: Option<Arc<Semaphore>>,
}

impl SparePolicy {
    /// Plain `serve -- CMD`: `most` spares from the start, for as long as it runs.
    pub fn always(most: usize) -> Self {
        SparePolicy {
            most,
            from_start: true,
            idle_ttl: None,
            budget: None,
        }
    }
}

pub struct Spares {
    policy: SparePolicy,
    idle: Mutex<VecDeque<Spare>>,
    /// Wakes the keeper: a spare was taken, or a session ended and made room.
    changed: Notify,
    /// Spares started so far (each gets a number for its stderr name).
    started: AtomicU64,
    /// A session has started since the server was last idle (demand-started spares).
    used: AtomicBool,
    /// When the last session started.
    last_used: Mutex<Instant>,
}

impl Spares {
    pub fn new(policy: SparePolicy) -> Self {
        Spares {
            policy,
            idle: Mutex::new(VecDeque::new()),
            changed: Notify::new(),
            started: AtomicU64::new(0),
            used: AtomicBool::new(false),
            last_used: Mutex::new(Instant::now()),
        }
    }

    /// How many spares the server wants now: its most when kept from the start or used
    /// lately, else none.
    fn want(&self) -> usize {
        if self.policy.from_start || self.used.load(Ordering::Relaxed) {
            self.policy.most
        } else {
            0
        }
    }

    /// Spares ready now.
    pub fn count(&self) -> usize {
        self.idle.lock().expect("spares lock").len()
    }

    /// A ready spare, if one is alive (dead ones found on the way are dropped, which
    /// kills what is left of them). Called for every new session: it is also what tells a
    /// server used on demand that it is in use.
    pub fn take(&self) -> Option<Spare> {
        if self.policy.most == 0 {
            return None;
        }
        *self.last_used.lock().expect("spares lock") = Instant::now();
        if !self.used.swap(true, Ordering::Relaxed) && !self.policy.from_start {
            // Started the keeper's filling for the next session.
            self.changed.notify_one();
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
        if self.policy.most > 0 {
            self.changed.notify_one();
        }
    }

    /// The keeper: keeps the wanted spares started while `--max-sessions` (and the
    /// listener's budget) leaves room, replaces dead ones, ends those of a server unused for
    /// `--spare-idle-ttl`, and ends them all when serve stops or drains.
    pub async fn keep(gateway: Arc<Gateway>) {
        let spares = &gateway.spares;
        if spares.policy.most == 0 {
            return;
        }
        loop {
            if gateway.closing.is_cancelled() || gateway.draining.is_cancelled() {
                break;
            }
            spares.sweep();
            if spares.expired() {
                let ended = spares.count();
                spares.end_all(gateway.config.child_grace).await;
                tracing::info!(
                    ended,
                    "no new session for --spare-idle-ttl: the idle spares are ended until the server is used again"
                );
            }
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

    /// Whether a server used on demand has gone `--spare-idle-ttl` without a new session;
    /// if so it counts as unused again (and wants no spares) from now on.
    fn expired(&self) -> bool {
        let Some(ttl) = self.policy.idle_ttl else {
            return false;
        };
        if self.policy.from_start || !self.used.load(Ordering::Relaxed) {
            return false;
        }
        if self.last_used.lock().expect("spares lock").elapsed() < ttl {
            return false;
        }
        self.used.store(false, Ordering::Relaxed);
        true
    }

    /// Starts spares until there are as many as wanted, sessions and spares reach
    /// `--max-sessions`, or the listener's `--spare-budget` is spent.
    fn fill(&self, gateway: &Gateway) {
        let config = &gateway.config;
        loop {
            let idle = self.count();
            if idle >= self.want() || gateway.sessions.count() + idle >= config.max_sessions {
                return;
            }
            let budget = match &self.policy.budget {
                None => None,
                // Spent: another server holds the rest; the next sweep tries again.
                Some(budget) => match budget.clone().try_acquire_owned() {
                    Ok(permit) => Some(permit),
                    Err(_) => return,
                },
            };
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
            self.idle.lock().expect("spares lock").push_back(Spare {
                child,
                output,
                _budget: budget,
            });
        }
    }

    /// Ends every idle spare (as a session's child is ended) and waits until they are gone.
    pub async fn end_all(&self, grace: Duration) {
        let spares: Vec<Spare> = self.idle.lock().expect("spares lock").drain(..).collect();
        let endings = spares.into_iter().map(|spare| spare.child.terminate(grace));
        futures_util::future::join_all(endings).await;
    }
}
