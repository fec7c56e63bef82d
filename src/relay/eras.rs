//! Which era each side speaks, as far as is known: the host's from its first deciding
//! request, the upstream's from the probe (`detect`) or `--protocol-era`, cached for the
//! life of the process and forgotten when the upstream proves it wrong.

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::era::Era;
use crate::relay::config::EraChoice;

/// What the upstream speaks, once known.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamEra {
    Legacy,
    Modern {
        version: String,
        /// Its DiscoverResult, when the probe got one (shared: every request reads the era,
        /// and only `initialize` needs this).
        discover: Option<Arc<Value>>,
    },
}

impl UpstreamEra {
    pub fn era(&self) -> Era {
        match self {
            UpstreamEra::Legacy => Era::Legacy,
            UpstreamEra::Modern { .. } => Era::Modern,
        }
    }
}

pub struct Eras {
    /// `--protocol-era`.
    pub choice: EraChoice,
    host: OnceLock<Era>,
    /// The host's first request was a 2026-07-28 `server/discover` (its era is not fixed
    /// until its next request, but until then it is taken as modern).
    probed_modern: std::sync::atomic::AtomicBool,
    upstream: Mutex<Option<UpstreamEra>>,
    /// Held by the one request that probes; the others wait for its verdict.
    pub probing: tokio::sync::Mutex<()>,
}

impl Eras {
    pub fn new(choice: EraChoice) -> Self {
        let known = (choice == EraChoice::Legacy).then_some(UpstreamEra::Legacy);
        Self {
            choice,
            host: OnceLock::new(),
            probed_modern: std::sync::atomic::AtomicBool::new(false),
            upstream: Mutex::new(known),
            probing: tokio::sync::Mutex::new(()),
        }
    }

    /// The host's era, once its first deciding request has arrived; modern after a
    /// 2026-07-28 `server/discover` until a deciding request says otherwise.
    pub fn host(&self) -> Option<Era> {
        self.host.get().copied().or_else(|| {
            self.probed_modern
                .load(std::sync::atomic::Ordering::Relaxed)
                .then_some(Era::Modern)
        })
    }

    /// Decides the host's era from a request, if it is the first that can: `initialize`
    /// means legacy, an enveloped request modern; `ping` decides nothing (legacy hosts may
    /// ping before initializing), and anything else is a legacy host that skipped the
    /// handshake. `server/discover` is served as modern but decides nothing either: a host
    /// in auto mode (the Python SDK's and fastmcp's `Client`) probes with it and, when it is
    /// refused, falls back to `initialize`, which must then be taken as a legacy host's.
    pub fn note_host_request(&self, method: &str, claims_modern: bool) -> Option<Era> {
        if let Some(era) = self.host.get() {
            return Some(*era);
        }
        if claims_modern && method == "server/discover" {
            self.probed_modern
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return Some(Era::Modern);
        }
        let era = if claims_modern {
            Era::Modern
        } else if method == "ping" {
            return None;
        } else {
            Era::Legacy
        };
        let era = *self.host.get_or_init(|| era);
        tracing::info!(host_era = era.name(), "host protocol era");
        Some(era)
    }

    /// The upstream's era if already known.
    pub fn upstream_known(&self) -> Option<UpstreamEra> {
        self.upstream.lock().expect("era lock").clone()
    }

    /// Forgets the verdict `was` after the server answered like the other era (a
    /// redeployed server, a load balancer in front of mixed versions); the next request
    /// probes again. A forced era (`--protocol-era`) is never forgotten.
    pub fn proven_wrong(&self, was: Era, evidence: &str) {
        if self.choice != EraChoice::Auto {
            return;
        }
        let mut upstream = self.upstream.lock().expect("era lock");
        if upstream.as_ref().map(UpstreamEra::era) == Some(was) {
            tracing::info!(%evidence, "the upstream no longer answers like a {} server; probing again on the next request", was.name());
            *upstream = None;
        }
    }

    /// Records what a translation learned (the DiscoverResult fetched later).
    pub fn set_upstream(&self, era: UpstreamEra) {
        *self.upstream.lock().expect("era lock") = Some(era);
    }
}
