//! The listener: binds, accepts connections and hands each request to the front door (one
//! gateway, or a config file's servers); on a signal it stops accepting, drains a replica
//! first, and gives requests in flight their grace.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::config::ServeConfig;
use super::front;
use super::gateway::Gateway;
use super::inbound;
use super::running::Running;
use super::servers::Servers;

/// Binds the listener; the address it got (port 0 becomes a real one).
async fn bind(listen: SocketAddr) -> Result<(TcpListener, SocketAddr), i32> {
    match TcpListener::bind(listen).await {
        Ok(listener) => {
            let bound = listener.local_addr().unwrap_or(listen);
            Ok((listener, bound))
        }
        Err(e) => {
            tracing::error!("cannot listen on {listen}: {e}");
            Err(1)
        }
    }
}

/// `http://host:port` of a bound address, for the startup lines.
fn origin(bound: SocketAddr) -> String {
    match bound.ip() {
        std::net::IpAddr::V6(ip) => format!("http://[{ip}]:{}", bound.port()),
        ip => format!("http://{ip}:{}", bound.port()),
    }
}

/// Runs serve mode until SIGINT or SIGTERM; returns the exit code.
pub async fn run(config: ServeConfig) -> i32 {
    let (listener, bound) = match bind(config.listen).await {
        Ok(bound) => bound,
        Err(code) => return code,
    };
    let mut config = config;
    config.guards.port = bound.port();
    config.policing = match config.policy.load() {
        Ok(policing) => policing,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    config.auditor = match config.audit.clone().map(crate::audit::Auditor::start) {
        Some(Ok(auditor)) => Some(auditor),
        Some(Err(e)) => {
            tracing::error!("{e}");
            return 1;
        }
        None => None,
    };
    if let Err(e) = start_telemetry(config.telemetry.as_ref()) {
        tracing::error!("{e}");
        return 1;
    }
    tracing::info!(
        "serving `{}` at {}{}",
        config.command.argv.join(" "),
        origin(bound),
        config.path
    );
    let running = match Running::start(config).await {
        Ok(running) => running,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let gateway = running.gateway.clone();
    let route = Route::One(gateway.clone());
    let graceful = accept(listener, &route).await;
    let grace = if gateway.draining.is_cancelled() {
        Duration::from_secs(1)
    } else {
        gateway.config.shutdown_grace
    };
    route.close(graceful, grace).await;
    running.stop().await;
    if let Some(auditor) = &gateway.config.auditor {
        auditor.settle(Duration::from_secs(2)).await;
    }
    crate::telemetry::shutdown().await;
    0
}

/// Starts OpenTelemetry's exporters when it is asked for.
fn start_telemetry(settings: Option<&crate::telemetry::Settings>) -> Result<(), String> {
    match settings {
        Some(settings) => crate::telemetry::start(settings, crate::telemetry::Side::Server),
        None => Ok(()),
    }
}

/// `serve --config FILE`: every server of the file on one listener, at `/NAME/mcp`;
/// SIGHUP reloads the file. Returns the exit code.
pub async fn run_servers(base: ServeConfig, file: std::path::PathBuf) -> i32 {
    let (listener, bound) = match bind(base.listen).await {
        Ok(bound) => bound,
        Err(code) => return code,
    };
    let mut base = base;
    base.guards.port = bound.port();
    if let Err(e) = start_telemetry(base.telemetry.as_ref()) {
        tracing::error!("{e}");
        return 1;
    }
    let servers = match Servers::start(base, file, origin(bound)).await {
        Ok(servers) => Arc::new(servers),
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let route = Route::Many(servers.clone());
    let graceful = accept(listener, &route).await;
    route.close(graceful, servers.shutdown_grace()).await;
    servers.stop_all().await;
    if let Some(auditor) = &servers.base().auditor {
        auditor.settle(Duration::from_secs(2)).await;
    }
    crate::telemetry::shutdown().await;
    0
}

/// Where the listener's requests go: the one gateway, or the config file's servers.
#[derive(Clone)]
enum Route {
    One(Arc<Gateway>),
    Many(Arc<Servers>),
}

impl Route {
    /// Streams end; requests in flight get `grace` to finish.
    async fn close(&self, graceful: GracefulShutdown, grace: Duration) {
        match self {
            Route::One(gateway) => gateway.closing.cancel(),
            Route::Many(servers) => servers.closing(),
        }
        if tokio::time::timeout(grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::info!(
                grace_s = grace.as_secs_f64(),
                "connections still open after the shutdown grace; closing them"
            );
        }
    }
}

/// Accepts connections until a signal says stop (among replicas, SIGTERM first drains).
async fn accept(listener: TcpListener, route: &Route) -> GracefulShutdown {
    let graceful = GracefulShutdown::new();
    let (header_timeout, max_drain, drain_timeout) = match route {
        Route::One(gateway) => (
            gateway.config.header_read_timeout,
            gateway.config.max_drain_size,
            gateway.config.drain_timeout,
        ),
        Route::Many(servers) => {
            let config = servers.base();
            (
                config.header_read_timeout,
                config.max_drain_size,
                config.drain_timeout,
            )
        }
    };
    let mut signals = std::pin::pin!(crate::shutdown::signal());
    // SIGHUP reloads a config file, or the command line's `--policy` file.
    let reloads = match route {
        Route::Many(_) => true,
        Route::One(gateway) => gateway.config.policing.is_some(),
    };
    let mut hangups = crate::shutdown::Hangups::new(reloads);
    // Fired when a replica's drain is over (its sessions ended, or the grace is up).
    let drained = CancellationToken::new();
    loop {
        tokio::select! {
            name = &mut signals => {
                if let Route::One(gateway) = route
                    && gateway.cluster.is_some()
                    && !gateway.draining.is_cancelled()
                {
                    tracing::info!(signal = name, grace_s = gateway.config.shutdown_grace.as_secs_f64(), "draining: not ready, no new sessions; open sessions go on until they end or the grace is up (signal again to stop now)");
                    gateway.draining.cancel();
                    tokio::spawn(drain(gateway.clone(), drained.clone()));
                    signals.set(crate::shutdown::signal());
                    continue;
                }
                tracing::info!(signal = name, "shutting down: no new connections");
                break;
            }
            _ = drained.cancelled() => {
                tracing::info!("drained: shutting down");
                break;
            }
            () = hangups.next() => {
                match route {
                    Route::Many(servers) => {
                        // Off the accept loop: a reload may wait on a server's start.
                        let servers = servers.clone();
                        tokio::spawn(async move { servers.reload().await });
                    }
                    Route::One(gateway) => reload_policy(gateway),
                }
            }
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let route = route.clone();
                let service = hyper::service::service_fn(move |request| {
                    let route = route.clone();
                    async move {
                        let (request, unread) = inbound::watch(request);
                        let response = match route {
                            Route::One(gateway) => front::handle(gateway, peer, request).await,
                            Route::Many(servers) => servers.handle(peer, request).await,
                        };
                        // An answer given before the body was read (a 401, say) must not
                        // leave the client a connection that is closing under it.
                        let response = unread.settle(response, max_drain, drain_timeout).await;
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let connection = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Some(header_timeout))
                    .serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!("connection ended: {e}");
                    }
                });
            }
        }
    }
    drop(listener);
    graceful
}

/// SIGHUP with `--policy`: the file read again; one that does not load keeps the rules in
/// force.
fn reload_policy(gateway: &Gateway) {
    let Some(policing) = &gateway.config.policing else {
        return;
    };
    match gateway.config.policy.reload(policing, Vec::new()) {
        Ok(rules) => tracing::info!(rules, "SIGHUP: the policy reloaded"),
        Err(e) => tracing::warn!("SIGHUP: the policy in force stays: {e}"),
    }
}

/// A replica's drain: waits until no session is open on it and no call waits parked here
/// (checked every 50 ms), or until `--shutdown-grace`, then fires `drained`.
async fn drain(gateway: Arc<Gateway>, drained: CancellationToken) {
    let deadline = tokio::time::Instant::now() + gateway.config.shutdown_grace;
    while tokio::time::Instant::now() < deadline {
        let sessions = gateway.sessions.count_unpooled();
        let parked = gateway.parked.count();
        if sessions == 0 && parked == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (sessions, parked) = (gateway.sessions.count_unpooled(), gateway.parked.count());
    if sessions > 0 || parked > 0 {
        tracing::info!(
            sessions,
            parked,
            "--shutdown-grace is up with sessions still open; ending them"
        );
    }
    drained.cancel();
}
