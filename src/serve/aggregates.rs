//! A config file's aggregate endpoints, each a gateway of its own at its path whose
//! sessions go to the file's servers (`aggregator/`): started with the servers, found by
//! path for each request, reported in `/readyz` and `/metrics`, stopped first at the end.

use std::sync::Arc;

use super::aggregator::{AggregateSpec, Endpoint, Members, ServerState};
use super::config::ServeConfig;
use super::gateway::Gateway;
use super::metrics::Gauges;
use super::running::Running;
use super::spares::SparePolicy;

/// One aggregate endpoint being served.
pub struct Aggregated {
    pub spec: AggregateSpec,
    pub endpoint: Arc<Endpoint>,
    pub gateway: Arc<Gateway>,
    running: std::sync::Mutex<Option<Running>>,
}

/// Starts one gateway per spec, each on the command line's settings at its own path.
pub async fn start(
    specs: Vec<AggregateSpec>,
    base: &ServeConfig,
    members: Arc<dyn Members>,
    origin: &str,
    authorization_server: Option<Arc<crate::authserver::AuthServer>>,
) -> Result<Vec<Aggregated>, String> {
    let mut started = Vec::new();
    for spec in specs {
        let endpoint = Endpoint::new(spec.clone(), base.aggregate.clone(), members.clone())?;
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
            Running::start_aggregate(config, endpoint.clone(), authorization_server.clone())
                .await?;
        tracing::info!(
            "serving {} at {origin}{} (separator {:?}, fail {})",
            spec.servers.join(", "),
            spec.path,
            spec.separator,
            if spec.fail_closed { "closed" } else { "open" }
        );
        started.push(Aggregated {
            gateway: running.gateway.clone(),
            running: std::sync::Mutex::new(Some(running)),
            endpoint,
            spec,
        });
    }
    Ok(started)
}

/// The aggregate endpoint at `path` (or whose protected-resource metadata `path` is).
pub fn at<'a>(
    aggregates: &'a [Aggregated],
    path: &str,
    metadata_prefix: &str,
) -> Option<&'a Aggregated> {
    let own = path
        .strip_prefix(metadata_prefix)
        .filter(|p| p.starts_with('/'))
        .unwrap_or(path);
    aggregates
        .iter()
        .find(|a| a.spec.path.eq_ignore_ascii_case(own))
}

/// `/readyz`'s lines for the aggregates, and whether one that fails closed has a server
/// down (then the process is not ready).
pub fn readiness(aggregates: &[Aggregated]) -> (String, bool) {
    let mut lines = String::new();
    let mut closed_and_down = false;
    for aggregate in aggregates {
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

/// `/metrics`' parts for the aggregates (each gateway's own, labelled `aggregate/NAME`),
/// and each server's state as a gauge.
pub fn metrics(aggregates: &[Aggregated]) -> (Vec<(String, String)>, String) {
    let mut parts = Vec::new();
    let mut states = String::from(
        "# HELP mcp_stdio_aggregate_server_up Whether an aggregate endpoint's server answers (1), is down (0) or was not asked yet (-1).\n# TYPE mcp_stdio_aggregate_server_up gauge\n",
    );
    for aggregate in aggregates {
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
    (
        parts,
        if aggregates.is_empty() {
            String::new()
        } else {
            states
        },
    )
}

/// Ends the aggregate endpoints' sessions (and with them their member sessions) and
/// their own sessions with the servers.
pub async fn stop_all(aggregates: &[Aggregated]) {
    for aggregate in aggregates {
        let running = aggregate.running.lock().expect("running lock").take();
        if let Some(running) = running {
            running.stop().await;
        }
        aggregate.endpoint.stop();
    }
}
