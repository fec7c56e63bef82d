//! A config file's aggregate endpoints, each a gateway of its own at its path whose
//! sessions go to the file's servers (`aggregator/`): started with the servers, found by
//! path for each request (a replaced one's sessions by the session they hold), replaced
//! when a reload changes them (the old one drains as a server's old generation does, and
//! one whose servers were replaced reads their lists again), reported in `/readyz` and
//! `/metrics`, stopped first at the end.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::aggregator::{AggregateSpec, Endpoint, Members, ServerState};
use super::config::ServeConfig;
use super::gateway::Gateway;
use super::metrics::Gauges;
use super::running::{self, Running};
use super::spares::SparePolicy;
use crate::authserver::AuthServer;

/// One aggregate endpoint being served.
pub struct Aggregated {
    pub spec: AggregateSpec,
    pub endpoint: Arc<Endpoint>,
    pub gateway: Arc<Gateway>,
    running: Mutex<Option<Running>>,
}

impl Aggregated {
    /// Ends the endpoint's sessions (and with them their member sessions) and its own
    /// sessions with the servers.
    async fn stop(&self) {
        self.gateway.closing.cancel();
        let running = self.running.lock().expect("running lock").take();
        if let Some(running) = running {
            running.stop().await;
        }
        self.endpoint.stop();
    }
}

/// What every aggregate endpoint of the listener is made with.
pub struct Making {
    /// The command line's settings.
    pub base: ServeConfig,
    pub members: Arc<dyn Members>,
    /// `http://host:port`, for the log.
    pub origin: String,
    /// `--enable-oauth`: the listener's authorization server.
    pub authorization: Option<Arc<AuthServer>>,
}

/// The listener's aggregate endpoints: the current ones, and those a reload replaced
/// while their sessions finish.
pub struct Aggregates {
    making: Making,
    current: RwLock<Vec<Arc<Aggregated>>>,
    retiring: Arc<Mutex<Vec<Arc<Aggregated>>>>,
    retirements: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Aggregates {
    /// Starts one gateway per spec.
    pub async fn start(specs: Vec<AggregateSpec>, making: Making) -> Result<Self, String> {
        let mut current = Vec::new();
        for spec in specs {
            current.push(start_one(&making, spec).await?);
        }
        Ok(Aggregates {
            making,
            current: RwLock::new(current),
            retiring: Arc::new(Mutex::new(Vec::new())),
            retirements: Mutex::new(Vec::new()),
        })
    }

    pub fn current(&self) -> Vec<Arc<Aggregated>> {
        self.current.read().expect("aggregates lock").clone()
    }

    /// The gateway for a request to `path` (or to its protected-resource metadata under
    /// `metadata_prefix`): a replaced endpoint's that holds `session`, else the current one.
    pub fn route(
        &self,
        path: &str,
        metadata_prefix: &str,
        session: Option<&str>,
    ) -> Option<Arc<Gateway>> {
        if let Some(id) = session {
            let retiring = self.retiring.lock().expect("retiring lock");
            let holder = retiring
                .iter()
                .find(|a| a.spec.path.eq_ignore_ascii_case(path) && a.gateway.sessions.holds(id));
            if let Some(holder) = holder {
                return Some(holder.gateway.clone());
            }
        }
        let own = path
            .strip_prefix(metadata_prefix)
            .filter(|p| p.starts_with('/'))
            .unwrap_or(path);
        self.current()
            .into_iter()
            .find(|a| a.spec.path.eq_ignore_ascii_case(own))
            .map(|a| a.gateway.clone())
    }

    pub fn paths(&self) -> Vec<String> {
        self.current().iter().map(|a| a.spec.path.clone()).collect()
    }

    pub fn first_gateway(&self) -> Option<Arc<Gateway>> {
        self.current().first().map(|a| a.gateway.clone())
    }

    /// A reload is about to replace (or remove) the servers `names`: every endpoint stops
    /// starting sessions with them, and takes the end of its sessions with their old
    /// generation for what it is.
    pub fn servers_replacing(&self, names: &[String]) {
        for aggregate in self.current() {
            aggregate.endpoint.servers_replacing(names);
        }
    }

    /// The reload replaced them: every endpoint lets go of its own sessions with their old
    /// generation and reads their lists again from the new one.
    pub async fn servers_replaced(&self, names: &[String]) {
        for aggregate in self.current() {
            aggregate.endpoint.servers_replaced(names).await;
        }
    }

    /// A reload: keeps the endpoints whose spec is the same, starts the new and changed
    /// ones, and retires the rest, whose sessions go on until they end or `grace` is up.
    pub async fn apply(
        &self,
        specs: Vec<AggregateSpec>,
        grace: Duration,
        closing: &CancellationToken,
    ) {
        let old = self.current();
        let mut next = Vec::new();
        for spec in specs {
            if let Some(kept) = old.iter().find(|a| a.spec == spec) {
                next.push(kept.clone());
                continue;
            }
            let name = spec.name.clone();
            match start_one(&self.making, spec).await {
                Ok(started) => next.push(started),
                Err(e) => {
                    tracing::error!(aggregate = %name, "SIGHUP: the changed aggregate endpoint could not start, the old one goes on: {e}");
                    if let Some(previous) = old.iter().find(|a| a.spec.name == name) {
                        next.push(previous.clone());
                    }
                }
            }
        }
        let gone: Vec<Arc<Aggregated>> = old
            .into_iter()
            .filter(|a| !next.iter().any(|n| Arc::ptr_eq(n, a)))
            .collect();
        *self.current.write().expect("aggregates lock") = next;
        for aggregate in gone {
            self.retire(aggregate, grace, closing.clone());
        }
    }

    fn retire(&self, aggregate: Arc<Aggregated>, grace: Duration, closing: CancellationToken) {
        aggregate.gateway.draining.cancel();
        self.retiring
            .lock()
            .expect("retiring lock")
            .push(aggregate.clone());
        let retiring = self.retiring.clone();
        let task = tokio::spawn(async move {
            let name = aggregate.spec.name.clone();
            if !running::drained(&aggregate.gateway, grace, &closing).await {
                tracing::info!(aggregate = %name, "--reload-grace is up; ending the old aggregate endpoint's sessions");
            }
            retiring
                .lock()
                .expect("retiring lock")
                .retain(|a| !Arc::ptr_eq(a, &aggregate));
            aggregate.stop().await;
            tracing::info!(aggregate = %name, "an old aggregate endpoint stopped");
        });
        let mut retirements = self.retirements.lock().expect("retirements lock");
        retirements.retain(|task| !task.is_finished());
        retirements.push(task);
    }

    /// `/readyz`'s lines for the aggregates, and whether one that fails closed has a
    /// server down (then the process is not ready).
    pub fn readiness(&self) -> (String, bool) {
        let mut lines = String::new();
        let mut closed_and_down = false;
        for aggregate in self.current() {
            for (server, state) in aggregate.endpoint.states() {
                let state = match state {
                    ServerState::NotStarted => "not started".to_owned(),
                    ServerState::Up => "up".to_owned(),
                    ServerState::Down(why) => {
                        closed_and_down |= aggregate.spec.fail_closed;
                        format!("down: {why}")
                    }
                };
                lines.push_str(&format!(
                    "aggregate {} server {server}: {state}\n",
                    aggregate.spec.name
                ));
            }
        }
        (lines, closed_and_down)
    }

    /// `/metrics`' parts for the aggregates (each gateway's own, labelled
    /// `aggregate/NAME`), and each server's state as a gauge.
    pub fn metrics(&self) -> (Vec<(String, String)>, String) {
        let current = self.current();
        let mut parts = Vec::new();
        let mut states = String::from(
            "# HELP mcp_stdio_aggregate_server_up Whether an aggregate endpoint's server answers (1), is down (0) or was not asked yet (-1).\n# TYPE mcp_stdio_aggregate_server_up gauge\n",
        );
        for aggregate in &current {
            let g = &aggregate.gateway;
            let gauges = Gauges {
                sessions: g.sessions.count(),
                spares: 0,
                pending_requests: g.sessions.pending_requests(),
            };
            parts.push((
                format!("aggregate/{}", aggregate.spec.name),
                g.metrics.render(&gauges),
            ));
            for (server, state) in aggregate.endpoint.states() {
                let value = match state {
                    ServerState::Up => 1,
                    ServerState::Down(_) => 0,
                    ServerState::NotStarted => -1,
                };
                states.push_str(&format!(
                    "mcp_stdio_aggregate_server_up{{aggregate=\"{}\",server=\"{server}\"}} {value}\n",
                    aggregate.spec.name
                ));
            }
        }
        if current.is_empty() {
            states.clear();
        }
        (parts, states)
    }

    /// Every endpoint's streams end (shutdown begins).
    pub fn closing(&self) {
        for aggregate in self.current() {
            aggregate.gateway.closing.cancel();
        }
    }

    /// Stops every endpoint, the retiring ones included.
    pub async fn stop_all(&self) {
        self.closing();
        for aggregate in self.current() {
            aggregate.stop().await;
        }
        let retirements = std::mem::take(&mut *self.retirements.lock().expect("retirements lock"));
        for task in retirements {
            let _ = task.await;
        }
    }
}

/// Starts one endpoint: its gateway on the command line's settings at its own path.
async fn start_one(making: &Making, spec: AggregateSpec) -> Result<Arc<Aggregated>, String> {
    let base = &making.base;
    let endpoint = Endpoint::new(spec.clone(), base.aggregate.clone(), making.members.clone())?;
    let mut config = base.clone();
    config.path = spec.path.clone();
    config.command = super::child::ChildCommand {
        argv: Vec::new(),
        env: Vec::new(),
        cwd: None,
        server: Some(format!("aggregate/{}", spec.name)),
        env_remove: Vec::new(),
    };
    // No child of its own: nothing to keep spare.
    config.spares = SparePolicy::always(0);
    if let Some(public) = &base.public_url {
        config.public_url = public.join(spec.path.trim_start_matches('/')).ok();
    }
    let running =
        Running::start_aggregate(config, endpoint.clone(), making.authorization.clone()).await?;
    tracing::info!(
        "serving {} at {}{} (separator {:?}, fail {})",
        spec.servers.join(", "),
        making.origin,
        spec.path,
        spec.separator,
        if spec.fail_closed { "closed" } else { "open" }
    );
    Ok(Arc::new(Aggregated {
        gateway: running.gateway.clone(),
        running: Mutex::new(Some(running)),
        endpoint,
        spec,
    }))
}
