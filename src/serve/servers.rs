//! `serve --config FILE`: the file's servers on one listener, each a gateway of its own at
//! `/NAME/mcp` (its metadata at `/.well-known/oauth-protected-resource/NAME/mcp`). SIGHUP
//! reloads the file: added servers start, removed ones drain and stop, changed ones get a
//! new gateway for new sessions while the old one finishes its own; a file that does not
//! parse changes nothing. `/healthz`, `/readyz` and `/metrics` (labelled by server) cover
//! them all.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::serve::inbound::Inbound;
use axum::body::Body;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::aggregates;
use super::aggregator::Members;
use super::config::ServeConfig;
use super::config_aggregates;
use super::config_apply;
use super::config_file::{self, Entry};
use super::front;
use super::gateway::Gateway;
use super::legacy::SESSION_ID;
use super::metrics::{Gauges, labelled};
use super::responses::{Readiness, readyz, text};
use super::running::Running;
use super::session::Session;
use super::sessions::Refused;
use crate::authserver::AuthServer;

const PRM_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// One name of the file: the gateway new requests get, and older ones (from before a
/// reload changed or removed it) still finishing their sessions.
struct Named {
    /// `None` once a reload removed the server.
    entry: Option<Entry>,
    current: Option<Arc<Gateway>>,
    retiring: Vec<Arc<Gateway>>,
}

pub struct Servers {
    /// The command line's settings, under every server's own.
    base: ServeConfig,
    file: PathBuf,
    /// `http://host:port` of the listener, for the log.
    origin: String,
    table: Arc<RwLock<BTreeMap<String, Named>>>,
    /// The running gateways of the current entries (their tasks are stopped at the end).
    running: Mutex<BTreeMap<String, Running>>,
    /// Gateways draining after a reload; each task ends its gateway when done.
    retirements: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    closing: CancellationToken,
    reloads_applied: AtomicU64,
    reloads_refused: AtomicU64,
    /// `--reload-grace`: how long a changed or removed server's sessions may go on.
    reload_grace: Duration,
    /// The aggregate endpoints (`--aggregate`, `[aggregates.NAME]`), fixed at start.
    aggregates: Vec<aggregates::Aggregated>,
    /// `--enable-oauth`: one authorization server for every endpoint of the listener
    /// (servers with an `auth` of their own excepted), and its housekeeping.
    authorization: Option<(Arc<AuthServer>, CancellationToken)>,
}

/// How an aggregate endpoint reaches the file's servers: through each one's current
/// gateway, so a reload's new generation serves its new sessions.
struct TableMembers(Arc<RwLock<BTreeMap<String, Named>>>);

impl Members for TableMembers {
    fn open(
        &self,
        server: &str,
        principal: Option<String>,
        pooled: bool,
    ) -> Result<Arc<Session>, String> {
        let gateway = self
            .0
            .read()
            .expect("table lock")
            .get(server)
            .and_then(|named| named.current.clone())
            .ok_or_else(|| "it was removed from the config file".to_owned())?;
        if gateway.closing.is_cancelled() {
            return Err("the gateway is shutting down".into());
        }
        gateway
            .open_session(principal, pooled)
            .map_err(|refused| match refused {
                Refused::Full(max) => format!("it holds its most sessions ({max}, max_sessions)"),
                Refused::PrincipalFull(max) => {
                    format!("you hold its most sessions per principal ({max})")
                }
                Refused::Spawn(why) => why,
            })
    }
}

impl Servers {
    /// Reads the file and starts every server in it.
    pub async fn start(base: ServeConfig, file: PathBuf, origin: String) -> Result<Self, String> {
        let loaded = config_file::load(&file, &|name| std::env::var(name).ok())?;
        let entries = loaded.entries;
        let named: Vec<config_aggregates::Server<'_>> = entries
            .iter()
            .map(|e| (e.name.as_str(), &e.aliases, e.checks_callers_itself()))
            .collect();
        let specs =
            config_aggregates::specs(&loaded.aggregates, &named, &base.aggregate, &base.path)
                .map_err(|e| format!("--config {}: {e}", file.display()))?;
        let authorization = match base.auth_server.clone() {
            Some(settings) => {
                let server = super::running::open_authorization_server(settings).await?;
                Some((server.clone(), super::running::keep_house(server)))
            }
            None => None,
        };
        let mut servers = Servers {
            authorization,
            reload_grace: base.reload_grace,
            base,
            file,
            origin,
            table: Arc::new(RwLock::new(BTreeMap::new())),
            running: Mutex::new(BTreeMap::new()),
            retirements: Mutex::new(Vec::new()),
            closing: CancellationToken::new(),
            reloads_applied: AtomicU64::new(0),
            reloads_refused: AtomicU64::new(0),
            aggregates: Vec::new(),
        };
        for entry in entries {
            servers.add(entry).await?;
        }
        let members = Arc::new(TableMembers(servers.table.clone()));
        let shared = servers.authorization.as_ref().map(|(s, _)| s.clone());
        servers.aggregates =
            aggregates::start(specs, &servers.base, members, &servers.origin, shared).await?;
        servers.authorization_covers_the_file();
        Ok(servers)
    }

    /// The command line's settings every server starts from.
    pub fn base(&self) -> &ServeConfig {
        &self.base
    }

    pub fn shutdown_grace(&self) -> Duration {
        self.base.shutdown_grace
    }

    async fn add(&self, entry: Entry) -> Result<(), String> {
        let name = entry.name.clone();
        let config = config_apply::apply(&entry, &self.base);
        tracing::info!(
            "serving `{}` at {}{}",
            super::config_remote::shown(&config.command.argv),
            self.origin,
            config.path
        );
        let shared = self.authorization.as_ref().map(|(s, _)| s.clone());
        let running = Running::start_sharing(config, shared).await?;
        let gateway = running.gateway.clone();
        let retired = self
            .running
            .lock()
            .expect("running lock")
            .insert(name.clone(), running);
        let mut table = self.table.write().expect("table lock");
        let named = table.entry(name.clone()).or_insert(Named {
            entry: None,
            current: None,
            retiring: Vec::new(),
        });
        named.entry = Some(entry);
        if let Some(old) = named.current.replace(gateway) {
            named.retiring.push(old);
        }
        drop(table);
        if let Some(old) = retired {
            self.retire(name, old);
        }
        self.authorization_covers_the_file();
        Ok(())
    }

    /// Tells the listener's authorization server which endpoints it issues tokens for:
    /// every current server without an `auth` of its own, and every aggregate endpoint.
    fn authorization_covers_the_file(&self) {
        let Some((server, _)) = &self.authorization else {
            return;
        };
        let mut paths: Vec<String> = self
            .table
            .read()
            .expect("table lock")
            .iter()
            .filter(|(_, named)| named.entry.as_ref().is_some_and(|e| e.auth.is_none()))
            .map(|(name, _)| format!("/{name}/mcp"))
            .collect();
        paths.extend(self.aggregates.iter().map(|a| a.spec.path.clone()));
        server.serve_paths(paths);
    }

    /// A gateway that answers for the listener's authorization server (its endpoints are
    /// the same at every gateway that uses it): the first aggregate, or else the first
    /// server that uses it.
    fn authorization_home(&self) -> Option<Arc<Gateway>> {
        self.authorization.as_ref()?;
        if let Some(aggregate) = self.aggregates.first() {
            return Some(aggregate.gateway.clone());
        }
        self.table
            .read()
            .expect("table lock")
            .values()
            .filter_map(|named| named.current.clone())
            .find(|gateway| gateway.auth.embedded().is_some())
    }

    fn remove(&self, name: &str) {
        let mut table = self.table.write().expect("table lock");
        if let Some(named) = table.get_mut(name) {
            named.entry = None;
            if let Some(old) = named.current.take() {
                named.retiring.push(old);
            }
        }
        drop(table);
        if let Some(old) = self.running.lock().expect("running lock").remove(name) {
            self.retire(name.to_owned(), old);
        }
        self.authorization_covers_the_file();
    }

    /// Lets an old gateway finish: no new sessions, its open ones go on until they end or
    /// `--reload-grace` is up, then it and its children stop.
    fn retire(&self, name: String, running: Running) {
        let gateway = running.gateway.clone();
        gateway.draining.cancel();
        let grace = self.reload_grace;
        let closing = self.closing.clone();
        let table = self.table.clone();
        let task = tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + grace;
            loop {
                let busy = gateway.sessions.count_unpooled()
                    + gateway.sessions.pending_requests()
                    + gateway.parked.count();
                if busy == 0 {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    tracing::info!(server = %name, sessions = gateway.sessions.count_unpooled(), "--reload-grace is up; ending the old server's sessions");
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    () = closing.cancelled() => break,
                }
            }
            {
                let mut table = table.write().expect("table lock");
                if let Some(named) = table.get_mut(&name) {
                    named.retiring.retain(|g| !Arc::ptr_eq(g, &gateway));
                    if named.entry.is_none() && named.retiring.is_empty() {
                        table.remove(&name);
                    }
                }
            }
            running.stop().await;
            tracing::info!(server = %name, "an old server generation stopped");
        });
        self.retirements
            .lock()
            .expect("retirements lock")
            .push(task);
    }

    /// SIGHUP: reads the file again and applies the difference; a file that does not
    /// parse (or names a program that cannot be found) changes nothing.
    pub async fn reload(&self) {
        let entries = match config_file::load(&self.file, &|name| std::env::var(name).ok()) {
            Ok(loaded) => {
                if !self.aggregates.is_empty() || !loaded.aggregates.is_empty() {
                    tracing::info!(
                        "SIGHUP: the aggregate endpoints stay as they started (a change to them takes a restart); their servers follow the file"
                    );
                }
                loaded.entries
            }
            Err(e) => {
                self.reloads_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("SIGHUP: not reloaded, every server goes on as it was: {e}");
                return;
            }
        };
        let before: BTreeMap<String, Entry> = self
            .table
            .read()
            .expect("table lock")
            .iter()
            .filter_map(|(name, named)| named.entry.clone().map(|e| (name.clone(), e)))
            .collect();
        let (mut added, mut changed, mut kept) = (Vec::new(), Vec::new(), Vec::new());
        for entry in &entries {
            match before.get(&entry.name) {
                None => added.push(entry.name.clone()),
                Some(old) if old == entry => kept.push(entry.name.clone()),
                Some(_) => changed.push(entry.name.clone()),
            }
        }
        let removed: Vec<String> = before
            .keys()
            .filter(|name| !entries.iter().any(|e| &e.name == *name))
            .cloned()
            .collect();
        for entry in entries {
            let differs = added.contains(&entry.name) || changed.contains(&entry.name);
            if differs && let Err(e) = self.add(entry).await {
                tracing::error!("SIGHUP: {e}");
            }
        }
        for name in &removed {
            self.remove(name);
        }
        self.reloads_applied.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            added = %added.join(","),
            changed = %changed.join(","),
            removed = %removed.join(","),
            unchanged = %kept.join(","),
            "SIGHUP: reloaded {}",
            self.file.display()
        );
    }

    /// Shutdown begins: every gateway's streams end.
    pub fn closing(&self) {
        self.closing.cancel();
        for named in self.table.read().expect("table lock").values() {
            for gateway in named.current.iter().chain(&named.retiring) {
                gateway.closing.cancel();
            }
        }
    }

    /// Ends every server, the draining ones included.
    pub async fn stop_all(&self) {
        self.closing();
        for aggregate in &self.aggregates {
            aggregate.gateway.closing.cancel();
        }
        aggregates::stop_all(&self.aggregates).await;
        if let Some((_, housekeeping)) = &self.authorization {
            housekeeping.cancel();
        }
        let running: Vec<Running> =
            std::mem::take(&mut *self.running.lock().expect("running lock"))
                .into_values()
                .collect();
        for running in running {
            running.stop().await;
        }
        let retirements = std::mem::take(&mut *self.retirements.lock().expect("retirements lock"));
        for task in retirements {
            let _ = task.await;
        }
    }

    pub async fn handle(
        self: Arc<Self>,
        peer: SocketAddr,
        request: Request<Inbound>,
    ) -> Response<Body> {
        let path = request.uri().path().to_owned();
        let method = request.method().clone();
        match (&method, path.as_str()) {
            (&Method::GET, "/healthz") => return text(StatusCode::OK, "ok\n"),
            // One server at its --max-sessions leaves the others taking sessions, and only
            // a reload's retiring generations drain: the process is ready until it stops.
            (&Method::GET, "/readyz") => {
                let (lines, closed_and_down) = aggregates::readiness(&self.aggregates);
                if self.closing.is_cancelled() {
                    return readyz(Readiness::ShuttingDown);
                }
                let status = if closed_and_down {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::OK
                };
                let head = if closed_and_down {
                    "not ready: an aggregate that fails closed has a server down\n"
                } else {
                    "ready\n"
                };
                return Response::builder()
                    .status(status)
                    .header(CONTENT_TYPE, "text/plain")
                    .body(Body::from(format!("{head}{lines}")))
                    .expect("a valid response");
            }
            (&Method::GET, "/metrics") => return self.metrics(&request),
            _ => {}
        }
        if let Some(aggregate) = aggregates::at(&self.aggregates, &path, PRM_PREFIX) {
            let gateway = aggregate.gateway.clone();
            let span = gateway.config.span();
            return front::handle(gateway, peer, request).instrument(span).await;
        }
        let name = path
            .strip_prefix(PRM_PREFIX)
            .unwrap_or(&path)
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        let session = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok());
        let found = {
            let table = self.table.read().expect("table lock");
            table.get(name).map(|named| {
                // A session's requests go to the generation that holds it.
                let holder = session.and_then(|id| {
                    named
                        .retiring
                        .iter()
                        .find(|g| g.sessions.holds(id))
                        .cloned()
                });
                holder.or_else(|| named.current.clone())
            })
        };
        let gateway = match found {
            None => return self.not_a_server(name, peer, request).await,
            Some(None) => {
                return not_found(&format!(
                    "not found: the server {name:?} was removed from the config file\n"
                ));
            }
            Some(Some(gateway)) => gateway,
        };
        let span = gateway.config.span();
        front::handle(gateway, peer, request).instrument(span).await
    }

    /// A request for no server of the file: the authorization server's (`--enable-oauth`),
    /// or a 404 that lists the endpoints.
    async fn not_a_server(
        &self,
        name: &str,
        peer: SocketAddr,
        request: Request<Inbound>,
    ) -> Response<Body> {
        if let Some(home) = self.authorization_home() {
            let span = home.config.span();
            let answer = front::handle(home, peer, request).instrument(span).await;
            if answer.status() != StatusCode::NOT_FOUND {
                return answer;
            }
        }
        let names: Vec<String> = self
            .table
            .read()
            .expect("table lock")
            .iter()
            .filter(|(_, n)| n.entry.is_some())
            .map(|(name, _)| format!("/{name}/mcp"))
            .chain(self.aggregates.iter().map(|a| a.spec.path.clone()))
            .collect();
        not_found(&format!(
            "not found: no server here is named {name:?}; the endpoints are {}\n",
            names.join(", ")
        ))
    }

    /// Every server's metrics, each sample labelled `server="NAME"`, and the reloads.
    /// Guarded by the command line's `--auth-token` when there is one.
    fn metrics(&self, request: &Request<Inbound>) -> Response<Body> {
        if let Some(token) = &self.base.auth_token {
            let presented = request
                .headers()
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if !presented.is_some_and(|p| crate::secret::matches(p, token)) {
                return Response::builder()
                    .status(StatusCode::UNAUTHORIZED)
                    .header(http::header::WWW_AUTHENTICATE, "Bearer")
                    .body(Body::from(
                        "send Authorization: Bearer <the --auth-token>\n",
                    ))
                    .expect("a valid response");
            }
        }
        let (parts, servers) = {
            let table = self.table.read().expect("table lock");
            let parts: Vec<(String, String)> = table
                .iter()
                .flat_map(|(name, named)| {
                    named.current.iter().chain(&named.retiring).map(move |g| {
                        let gauges = Gauges {
                            sessions: g.sessions.count(),
                            spares: g.spares.count(),
                            pending_requests: g.sessions.pending_requests(),
                        };
                        (name.clone(), g.metrics.render(&gauges))
                    })
                })
                .collect();
            let servers = table.values().filter(|n| n.entry.is_some()).count();
            (parts, servers)
        };
        let (aggregate_parts, aggregate_states) = aggregates::metrics(&self.aggregates);
        let parts: Vec<(String, String)> = parts.into_iter().chain(aggregate_parts).collect();
        let mut body = labelled(&parts);
        body.push_str(&aggregate_states);
        body.push_str(&format!(
            "# HELP mcp_stdio_servers Servers the config file names.\n# TYPE mcp_stdio_servers gauge\nmcp_stdio_servers {servers}\n\
             # HELP mcp_stdio_config_reloads_total SIGHUP reloads, applied or refused (the file did not parse).\n# TYPE mcp_stdio_config_reloads_total counter\n\
             mcp_stdio_config_reloads_total{{outcome=\"applied\"}} {}\nmcp_stdio_config_reloads_total{{outcome=\"refused\"}} {}\n",
            self.reloads_applied.load(Ordering::Relaxed),
            self.reloads_refused.load(Ordering::Relaxed),
        ));
        Response::builder()
            .header(CONTENT_TYPE, "text/plain; version=0.0.4")
            .body(Body::from(body))
            .expect("a valid response")
    }
}

fn not_found(message: &str) -> Response<Body> {
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(CONTENT_TYPE, "text/plain")
        .body(Body::from(message.to_owned()))
        .expect("a valid response")
}
