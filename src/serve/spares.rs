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
//! idle process before its first client. When a used server finds the budget spent, a
//! server used on demand that has had no session for `--spare-yield-after` gives its spares
//! back.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use tokio_util::sync::CancellationToken;

use super::child::{Child, ChildCommand, Output};

/// How often idle spares are checked for having died (a spare that exits says nothing
/// else: it has no session to fail).
const SWEEP: Duration = Duration::from_secs(1);

/// The listener's `--spare-budget`, shared by every server of a config file.
#[derive(Debug)]
pub struct SpareBudget {
    permits: Arc<Semaphore>,
    /// A server wanted a spare and found the budget spent.
    starved: AtomicBool,
}

impl SpareBudget {
    pub fn new(spares: usize) -> Self {
        SpareBudget {
            permits: Arc::new(Semaphore::new(spares)),
            starved: AtomicBool::new(false),
        }
    }
}

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
    pub budget: Option<Arc<SpareBudget>>,
    /// `--spare-yield-after`: how long a server used on demand must have gone without a
    /// session before it gives its spares back to a server that found the budget spent.
    pub yield_after: Duration,
}

impl SparePolicy {
    /// Plain `serve -- CMD`: `most` spares from the start, for as long as it runs.
    pub fn always(most: usize) -> Self {
        SparePolicy {
            most,
            from_start: true,
            idle_ttl: None,
            budget: None,
            yield_after: Duration::MAX,
        }
    }
}

/// How the keeper starts a spare and within what: what a session's child is started with.
pub struct SpareLaunch {
    pub command: ChildCommand,
    pub max_message_size: usize,
    pub child_queue: usize,
    /// `--max-sessions`: sessions and spares together stay within it.
    pub max_sessions: usize,
    /// How long a spare gets to end when it is ended.
    pub child_grace: Duration,
}

pub struct Spares {
    policy: SparePolicy,
    launch: SpareLaunch,
    idle: Mutex<VecDeque<Spare>>,
    /// Wakes the keeper: a spare was taken, or a session ended and made room.
    changed: Notify,
    /// Spares started so far (each gets a number for its stderr name).
    started: AtomicU64,
    /// Whether the server is in use, and when a session last started or ended.
    usage: Mutex<Usage>,
}

/// A server used on demand is in use from its first session until it has gone
/// `--spare-idle-ttl` without one (or yields to a busier server).
struct Usage {
    used: bool,
    last: Instant,
}

impl Spares {
    pub fn new(policy: SparePolicy, launch: SpareLaunch) -> Self {
        Spares {
            policy,
            launch,
            idle: Mutex::new(VecDeque::new()),
            changed: Notify::new(),
            started: AtomicU64::new(0),
            usage: Mutex::new(Usage {
                used: false,
                last: Instant::now(),
            }),
        }
    }

    /// How many spares the server wants now: its most when kept from the start or used
    /// lately, else none.
    fn want(&self) -> usize {
        if self.policy.from_start || self.usage.lock().expect("spares lock").used {
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
        {
            let mut usage = self.usage.lock().expect("spares lock");
            usage.last = Instant::now();
            usage.used = true;
        }
        // The keeper refills (or, on a server's first use, starts its spares).
        self.changed.notify_one();
        let mut idle = self.idle.lock().expect("spares lock");
        let taken = loop {
            let mut spare = idle.pop_front()?;
            if !spare.child.has_exited() && !spare.output.is_closed() {
                break spare;
            }
        };
        drop(idle);
        Some(taken)
    }

    /// Room for a spare may have opened (a session ended); the server was in use until now.
    pub fn room(&self) {
        if self.policy.most > 0 {
            self.usage.lock().expect("spares lock").last = Instant::now();
            self.changed.notify_one();
        }
    }

    /// The keeper: keeps the wanted spares started while `--max-sessions` (and the
    /// listener's budget) leaves room, replaces dead ones, ends those of a server unused for
    /// `--spare-idle-ttl`, and ends them all when serve stops or drains.
    /// `sessions_open` counts the server's sessions; `closing` and `draining` end the keeping.
    pub async fn keep(
        &self,
        sessions_open: impl Fn() -> usize,
        closing: &CancellationToken,
        draining: &CancellationToken,
    ) {
        if self.policy.most == 0 {
            return;
        }
        let grace = self.launch.child_grace;
        loop {
            if closing.is_cancelled() || draining.is_cancelled() {
                break;
            }
            self.sweep();
            let busy = sessions_open() > 0;
            if let Some(why) = self.unused(busy) {
                let ended = self.count();
                self.end_all(grace).await;
                tracing::info!(
                    ended,
                    "{why}: the idle spares are ended until the server is used again"
                );
            }
            self.fill(sessions_open());
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(SWEEP) => {}
                _ = closing.cancelled() => break,
                _ = draining.cancelled() => break,
            }
        }
        self.end_all(grace).await;
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

    /// Whether a server used on demand is no longer in use: no session for
    /// `--spare-idle-ttl`, or for `--spare-yield-after` while another server found the budget
    /// spent. It then wants no spares until its next session. Never while it has sessions.
    fn unused(&self, busy: bool) -> Option<&'static str> {
        if self.policy.from_start || busy {
            return None;
        }
        let mut usage = self.usage.lock().expect("spares lock");
        if !usage.used {
            return None;
        }
        let quiet = usage.last.elapsed();
        let why = if self.policy.idle_ttl.is_some_and(|ttl| quiet >= ttl) {
            "no session for --spare-idle-ttl"
        } else if quiet >= self.policy.yield_after
            && self
                .policy
                .budget
                .as_ref()
                .is_some_and(|b| b.starved.swap(false, Ordering::Relaxed))
        {
            "a busier server found the --spare-budget spent"
        } else {
            return None;
        };
        usage.used = false;
        Some(why)
    }

    /// Starts spares until there are as many as wanted, sessions and spares reach
    /// `--max-sessions`, or the listener's `--spare-budget` is spent.
    fn fill(&self, sessions_open: usize) {
        let config = &self.launch;
        loop {
            let idle = self.count();
            if idle >= self.want() || sessions_open + idle >= config.max_sessions {
                return;
            }
            let budget = match &self.policy.budget {
                None => None,
                // Spent: other servers hold the rest; one quiet for a while gives its spares
                // back, and the next sweep tries again.
                Some(budget) => match budget.permits.clone().try_acquire_owned() {
                    Ok(permit) => Some(permit),
                    Err(_) => {
                        budget.starved.store(true, Ordering::Relaxed);
                        return;
                    }
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
