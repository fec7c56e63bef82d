//! Serve mode: a local stdio MCP server published as one Streamable HTTP endpoint. Each
//! legacy-era session (an `initialize` without a session id) gets its own child process;
//! the HTTP side is hyper with a header-read timeout, the routes are in `routes`.

pub mod auth;
pub mod authserver;
pub mod child;
pub mod child_era;
pub mod cluster;
pub mod config_file;
mod front;
pub mod guard;
mod inbound;
pub mod jwks;
pub mod ladder;
mod legacy;
mod listen;
mod media;
mod metrics;
mod modern;
mod params;
mod pool;
mod remembered;
mod replica;
mod responses;
mod servers;
mod session;
mod sessions;
pub mod spares;
mod tool_cache;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::secret::Secret;
use guard::Guards;
use sessions::Sessions;

/// Everything serve mode needs, already validated by `cli`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The stdio server: program and arguments (and, from a config file, its environment
    /// and folder).
    pub command: child::ChildCommand,
    pub listen: SocketAddr,
    /// `--path`, starting with `/`; matched ASCII case-insensitively.
    pub path: String,
    /// `--auth-token` / `MCP_STDIO_SERVE_TOKEN`: every MCP request must carry it.
    pub auth_token: Option<Secret>,
    /// `--oauth-issuer` and its companions: tokens from an external authorization server.
    pub resource_server: Option<auth::ResourceServerConfig>,
    /// `--enable-oauth` and its companions: serve is its own authorization server.
    pub auth_server: Option<authserver::AuthServerConfig>,
    /// `--public-url`: this endpoint as clients reach it.
    pub public_url: Option<url::Url>,
    pub guards: Guards,
    pub max_sessions: usize,
    /// `--spare-children` and, under `--config`, `--spare-idle-ttl` and `--spare-budget`:
    /// children kept started for the next sessions (within `--max-sessions`).
    pub spares: spares::SparePolicy,
    /// `--max-sessions-per-principal`: sessions one authenticated principal may hold.
    pub max_sessions_per_principal: usize,
    /// `None`: sessions never expire for idleness.
    pub session_idle_ttl: Option<Duration>,
    /// `--session-max-age`: a session (and, among replicas, its sealed id) ends this long
    /// after it began, however busy.
    pub session_max_age: Duration,
    pub max_message_size: usize,
    pub max_requests_per_session: usize,
    /// Messages waiting for a child's stdin before a client is told it is not reading.
    pub child_queue: usize,
    /// Events kept per session for `Last-Event-ID`.
    pub replay_buffer: usize,
    /// Longest wait for the child's first word on a request (then 504).
    pub response_timeout: Duration,
    pub header_read_timeout: Duration,
    /// `--max-drain-size`: the most of a request body left unread by a refusal that is
    /// read and dropped to keep the connection open (larger ones close it).
    pub max_drain_size: u64,
    /// `--timeout-drain`: how long that rest may take to arrive.
    pub drain_timeout: Duration,
    pub keepalive: Duration,
    /// How long a child gets after its stdin closes, and again after SIGTERM.
    pub child_grace: Duration,
    pub shutdown_grace: Duration,
    /// `--modern-only`: no handshake era (GET and DELETE 405, `initialize` -32022).
    pub modern_only: bool,
    /// `--modern-clients` (or `--modern-only`): 2026-07-28 requests are served; otherwise
    /// they get the stateful-legacy 400, and a dual-era client falls back.
    pub modern_clients: bool,
    /// `--child-era`: probe the server's era, or take it as given.
    pub child_era: child_era::ChildEraChoice,
    /// `--child-probe-timeout`: how long the probe waits for `server/discover`.
    pub child_probe_timeout: Duration,
    /// `--input-timeout`: how long a call waits parked for a client's `input_required` retry.
    pub input_timeout: Duration,
    /// `--cluster-key-file` and `--advertise-url`: one of several replicas.
    pub cluster: Option<cluster::ClusterConfig>,
    /// `--reload-grace` (with `--config`): how long sessions of a server that a reload
    /// changed or removed may go on before they are ended.
    pub reload_grace: Duration,
}

/// State shared by every connection.
pub struct Gateway {
    pub config: ServeConfig,
    pub sessions: Sessions,
    /// Children started ahead for the next sessions.
    pub spares: spares::Spares,
    /// Backends of 2026-07-28 clients, by principal.
    pub pool: pool::Pool,
    pub metrics: metrics::Metrics,
    /// Fired at shutdown: streams end, no new sessions start.
    pub closing: CancellationToken,
    /// Fired at SIGTERM among replicas: not ready, no new sessions, the open ones go on
    /// until they end or `--shutdown-grace` is up.
    pub draining: CancellationToken,
    /// Among replicas: who owns a session, and the way to its owner.
    pub cluster: Option<cluster::Cluster>,
    /// The stdio server's era: probed once, corrected when a child proves it wrong.
    era: tokio::sync::Mutex<Option<child_era::ChildEra>>,
    /// Calls of handshake-era children waiting for a client's `input_required` retry.
    pub parked: Arc<crate::parking::Rounds<modern::ChildCall>>,
    /// How each request's caller is checked.
    pub auth: auth::Auth,
}

impl Gateway {
    /// The stdio server's protocol era: `--child-era`, or probed on first need (children
    /// start one at a time while it is probed).
    pub async fn child_era(&self) -> child_era::ChildEra {
        let config = &self.config;
        let mut era = self.era.lock().await;
        if let Some(known) = era.as_ref() {
            return known.clone();
        }
        let probed = match config.child_era {
            child_era::ChildEraChoice::Legacy => child_era::ChildEra::Legacy,
            child_era::ChildEraChoice::Modern => child_era::ChildEra::Modern,
            child_era::ChildEraChoice::Auto => {
                child_era::probe(
                    &config.command,
                    config.max_message_size,
                    config.child_probe_timeout,
                )
                .await
            }
        };
        *era = Some(probed.clone());
        probed
    }

    /// A child refused `initialize` with `-32022`: it speaks only 2026-07-28, whatever the
    /// probe concluded (it may have been too slow to answer it). Unless `--child-era`
    /// fixed the era, children are spoken to as 2026-07-28 servers from now on.
    pub async fn child_is_modern_after_all(&self) -> bool {
        if self.config.child_era != child_era::ChildEraChoice::Auto {
            return false;
        }
        tracing::warn!(
            "the stdio server refused initialize with -32022: the era probe was wrong; treating it as a 2026-07-28 server"
        );
        *self.era.lock().await = Some(child_era::ChildEra::Modern);
        true
    }
}

/// A gateway that is serving, with the tasks that keep it (idle reaping, spares, the
/// embedded authorization server's housekeeping); `stop` ends it all.
pub struct Running {
    pub gateway: Arc<Gateway>,
    reaper: tokio::task::JoinHandle<()>,
    keeper: tokio::task::JoinHandle<()>,
    housekeeping: Option<CancellationToken>,
}

impl Running {
    /// Builds the gateway for `config` (its port already known) and starts its tasks.
    pub async fn start(config: ServeConfig) -> Result<Running, String> {
        let cluster = config.cluster.as_ref().map(|settings| {
            cluster::Cluster::new(settings, config.response_timeout, config.session_max_age)
        });
        let parked = match &config.cluster {
            Some(settings) => {
                tracing::info!(advertise = %settings.advertise, "serving as one replica of a cluster");
                crate::parking::Rounds::sealed(
                    config.input_timeout,
                    crate::parking::Sealing {
                        sealer: settings.key.sealer("request-state"),
                        owner: settings.advertise.clone(),
                    },
                )
            }
            None => crate::parking::Rounds::new(config.input_timeout),
        };
        let embedded = match config.auth_server.clone() {
            Some(settings) => {
                tracing::info!(
                    store = %settings.store.describe(),
                    "the embedded OAuth authorization server is on"
                );
                Some(Arc::new(authserver::AuthServer::open(settings).await?))
            }
            None => None,
        };
        let housekeeping = embedded.clone().map(|server| {
            let closing = CancellationToken::new();
            let stop = closing.clone();
            tokio::spawn(async move { server.keep_house(closing).await });
            stop
        });
        let auth = auth::Auth::new(
            config.auth_token.clone(),
            config.resource_server.clone(),
            embedded,
        );
        let gateway = Arc::new(Gateway {
            auth,
            // Users exist only with OAuth (one shared secret is one principal).
            sessions: Sessions::new(
                config.max_sessions,
                (config.resource_server.is_some() || config.auth_server.is_some())
                    .then_some(config.max_sessions_per_principal),
                config.session_max_age,
            ),
            pool: pool::Pool::default(),
            spares: spares::Spares::new(config.spares.clone()),
            config,
            metrics: metrics::Metrics::default(),
            closing: CancellationToken::new(),
            draining: CancellationToken::new(),
            cluster,
            era: tokio::sync::Mutex::new(None),
            parked,
        });
        // A config file's servers say which one is talking in every line they log.
        let span = server_span(&gateway.config);
        let reaper = tokio::spawn(sessions::reap(gateway.clone()).instrument(span.clone()));
        let keeper = tokio::spawn(spares::Spares::keep(gateway.clone()).instrument(span));
        Ok(Running {
            gateway,
            reaper,
            keeper,
            housekeeping,
        })
    }

    /// Ends every session and spare (the gateway's `closing` has fired, or fires now).
    pub async fn stop(self) {
        self.gateway.closing.cancel();
        self.reaper.abort();
        if let Some(housekeeping) = self.housekeeping {
            housekeeping.cancel();
        }
        self.gateway.sessions.end_all(&self.gateway).await;
        // The keeper saw `closing` and ends the spares; wait for them (bounded like sessions).
        let bound = self.gateway.config.child_grace * 2 + Duration::from_secs(1);
        let _ = tokio::time::timeout(bound, self.keeper).await;
    }
}

/// The span a config file's server logs in (none for the single server of a command line).
pub fn server_span(config: &ServeConfig) -> tracing::Span {
    match &config.command.server {
        Some(name) => tracing::info_span!("server", name = %name),
        None => tracing::Span::none(),
    }
}

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
    0
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
    let servers = match servers::Servers::start(base, file, origin(bound)).await {
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
    0
}

/// Where the listener's requests go: the one gateway, or the config file's servers.
#[derive(Clone)]
enum Route {
    One(Arc<Gateway>),
    Many(Arc<servers::Servers>),
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
    let mut hangups = crate::shutdown::Hangups::new(matches!(route, Route::Many(_)));
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
                if let Route::Many(servers) = route {
                    servers.reload().await;
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
