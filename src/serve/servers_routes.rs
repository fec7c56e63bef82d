//! `serve --config`'s routes: `/healthz`, `/readyz` and `/metrics` for the whole file, a
//! request for an aggregate endpoint or a server (at the generation that holds its
//! session), the listener's authorization server, or a 404 that lists the endpoints.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use tracing::Instrument;

use super::front;
use super::gateway::Gateway;
use super::inbound::Inbound;
use super::legacy::SESSION_ID;
use super::metrics::{Gauges, labelled};
use super::responses::{Readiness, readyz, text};
use super::servers::{PRM_PREFIX, Servers};

impl Servers {
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
                let (lines, closed_and_down) = self
                    .aggregates
                    .as_ref()
                    .map_or((String::new(), false), |a| a.readiness());
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
            (&Method::GET, "/metrics") => return self.metrics(peer, &request).await,
            _ => {}
        }
        let session = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok());
        let aggregate = self.aggregates.as_ref();
        if let Some(gateway) = aggregate.and_then(|a| a.route(&path, PRM_PREFIX, session)) {
            let span = gateway.config.span();
            return front::handle(gateway, peer, request).instrument(span).await;
        }
        // The listener's authorization server first: its endpoints are one segment
        // (`/token`, `/authorize`, …) or its metadata, which no server's name may hide.
        let authorization_path = !path.trim_start_matches('/').contains('/')
            || path.starts_with("/.well-known/oauth-authorization-server")
            || path.starts_with("/.well-known/openid-configuration");
        if self.authorization.is_some() && authorization_path {
            return self
                .not_a_server(path.trim_start_matches('/'), peer, request)
                .await;
        }
        let name = path
            .strip_prefix(PRM_PREFIX)
            .unwrap_or(&path)
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
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

    /// A gateway that checks callers the command line's way (and so answers for the
    /// listener's authorization server, whose endpoints are the same at each): the first
    /// aggregate, or else the first server without an `auth` of its own.
    fn home(&self) -> Option<Arc<Gateway>> {
        if let Some(gateway) = self.aggregates.as_ref().and_then(|a| a.first_gateway()) {
            return Some(gateway);
        }
        self.table
            .read()
            .expect("table lock")
            .values()
            .filter(|named| named.entry.as_ref().is_some_and(|e| e.auth.is_none()))
            .find_map(|named| named.current.clone())
    }

    /// A request for no server of the file: the authorization server's (`--enable-oauth`),
    /// or a 404 that lists the endpoints.
    async fn not_a_server(
        &self,
        name: &str,
        peer: SocketAddr,
        request: Request<Inbound>,
    ) -> Response<Body> {
        // Protected-resource metadata names one endpoint: not the home's for another.
        let metadata = request.uri().path().starts_with(PRM_PREFIX);
        if !metadata && let Some(home) = self.authorization.as_ref().and(self.home()) {
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
            .chain(self.aggregates.iter().flat_map(|a| a.paths()))
            .collect();
        not_found(&format!(
            "not found: no server here is named {name:?}; the endpoints are {}\n",
            names.join(", ")
        ))
    }

    /// Every server's metrics, each sample labelled `server="NAME"`, and the reloads.
    /// Guarded by the command line's way of checking callers when it has one: its
    /// `--auth-token`, or a token `--oauth-issuer` or `--enable-oauth` accepts (as at the
    /// aggregate endpoint, or else the first server without an `auth` of its own).
    async fn metrics(&self, peer: SocketAddr, request: &Request<Inbound>) -> Response<Body> {
        let checked = self.base.resource_server.is_some() || self.base.auth_server.is_some();
        if checked {
            // No endpoint checks callers the command line's way: nobody can be checked.
            let Some(home) = self.home() else {
                return text(
                    StatusCode::UNAUTHORIZED,
                    "no endpoint of this file checks callers the command line's way, so /metrics cannot be authorized\n",
                );
            };
            if let Err(refused) = front::check_caller(&home, peer, request.headers()).await {
                return refused;
            }
        }
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
        let (aggregate_parts, aggregate_states) = self
            .aggregates
            .as_ref()
            .map_or((Vec::new(), String::new()), |a| a.metrics());
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
        body.push_str(&super::audited::metrics(self.base.auditor.as_ref()));
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
