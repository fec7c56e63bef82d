//! The state one served stdio server shares among its connections: `Gateway`, with the
//! stdio server's era and the few things every handler asks of it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use http::Response;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::policy::{Client, Principal};

use super::aggregator;
use super::auth;
use super::backend::Undeliverable;
use super::child::Child;
use super::child_call::ChildCall;
use super::child_era;
use super::cluster;
use super::config::ServeConfig;
use super::metrics;
use super::policing::{self, Verdict};
use super::pool;
use super::responses::{SseTiming, undeliverable_response};
use super::server_events::ServerEvents;
use super::session::Session;
use super::sessions::{Refused, Sessions, new_session_id, short};
use super::spares;
use super::stdio_backend::StdioBackend;

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
    pub(super) era: tokio::sync::Mutex<Option<child_era::ChildEra>>,
    /// Calls of handshake-era children waiting for a client's `input_required` retry.
    pub parked: Arc<crate::parking::Rounds<ChildCall>>,
    /// Tasks of handshake-era children held for 2026-07-28 clients.
    pub tasks: Arc<super::task_table::Tasks>,
    /// How each request's caller is checked.
    pub auth: auth::Auth,
    /// An aggregate endpoint: its sessions go to the endpoint's servers, not to a child.
    pub aggregate: Option<Arc<aggregator::Endpoint>>,
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

impl Gateway {
    /// Starts a session for `principal`: a warm spare or a new child, the task that routes
    /// its output and the supervisor that ends the child with the session (or the session
    /// with the child).
    pub fn open_session(
        self: &Arc<Self>,
        principal: Option<String>,
        pooled: bool,
    ) -> Result<Arc<Session>, Refused> {
        match &self.aggregate {
            Some(endpoint) => self.open_aggregate_session(endpoint.clone(), principal, pooled),
            None => self.open_child_session(principal, pooled),
        }
    }

    /// A session with a child of its own (see `open_session`).
    fn open_child_session(
        self: &Arc<Self>,
        principal: Option<String>,
        pooled: bool,
    ) -> Result<Arc<Session>, Refused> {
        let config = &self.config;
        let owner = principal.clone();
        let (session, (mut child, mut output_rx, warm, backend)) =
            self.sessions.insert_with(owner.as_deref(), || {
                // Among replicas the id is sealed and names this one, so the others can
                // forward.
                let id = match &self.cluster {
                    Some(cluster) => cluster.session_id(&new_session_id()),
                    None => new_session_id(),
                };
                // A warm spare when there is one (already loaded, nothing said to it yet).
                let (child, output_rx, warm) = match self.spares.take() {
                    Some(spare) => {
                        spare.child.rename(&short(&id));
                        (spare.child, spare.output, true)
                    }
                    None => {
                        let (output_tx, output_rx) = mpsc::channel(256);
                        let child = Child::spawn(
                            &config.command,
                            &short(&id),
                            config.max_message_size,
                            config.child_queue,
                            output_tx,
                        )
                        .map_err(|e| {
                            Refused::Spawn(format!(
                                "cannot start `{}`: {e}",
                                config.command.program()
                            ))
                        })?;
                        (child, output_rx, false)
                    }
                };
                let events = Arc::new(ServerEvents::new(short(&id), config.replay_buffer));
                let backend = Arc::new(StdioBackend::new(
                    short(&id),
                    child.stdin.clone(),
                    config.max_requests_per_session,
                    pooled,
                    events.clone(),
                ));
                let session =
                    Arc::new(Session::new(id, principal, backend.clone(), events, pooled));
                Ok((session, (child, output_rx, warm, backend)))
            })?;
        self.metrics
            .sessions_created
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(session = %short(&session.id), pid = child.id().unwrap_or(0), warm, "session started");

        // The child's output, routed as it comes.
        let router = session.clone();
        tokio::spawn(async move {
            while let Some(output) = output_rx.recv().await {
                backend.route(output);
            }
            // Its stdout closed: whatever it does now (it may linger, or leave processes
            // behind that keep its group alive), no answer can come any more.
            if !router.end.is_cancelled() {
                tracing::warn!(session = %short(&router.id), "the server process closed its output; the session is over");
                router.fail_all(
                    "the MCP server process exited or closed its output; start a new session",
                );
                router.end.cancel();
            }
        });
        // The supervisor: ends the child when the session ends, or the session when the
        // child dies.
        let supervised = session.clone();
        let gateway = self.clone();
        tokio::spawn(async move {
            let grace = gateway.config.child_grace;
            tokio::select! {
                status = child.exited() => {
                    gateway.metrics.children_exited.fetch_add(1, Ordering::Relaxed);
                    let status = status.map_or_else(|| "unknown".to_owned(), |s| s.to_string());
                    tracing::warn!(session = %short(&supervised.id), %status, "the server process exited; the session is over");
                    supervised.fail_all(&format!("the MCP server process exited ({status}); start a new session"));
                    // Anything it started is ended too.
                    child.terminate(Duration::ZERO).await;
                    supervised.record_duration(Some("server_exited"));
                }
                _ = supervised.end.cancelled() => {
                    supervised.fail_all("the session ended");
                    child.terminate(grace).await;
                    tracing::info!(session = %short(&supervised.id), "session ended");
                    supervised.record_duration(None);
                }
            }
            gateway.sessions.remove(&supervised.id);
            gateway.spares.room();
        });
        Ok(session)
    }

    /// Starts a session at an aggregate endpoint: its servers get sessions of their own
    /// when it first needs them; they end with it.
    fn open_aggregate_session(
        self: &Arc<Self>,
        endpoint: Arc<aggregator::Endpoint>,
        principal: Option<String>,
        pooled: bool,
    ) -> Result<Arc<Session>, Refused> {
        let config = &self.config;
        let owner = principal.clone();
        let (session, ()) = self.sessions.insert_with(owner.as_deref(), || {
            let id = match &self.cluster {
                Some(cluster) => cluster.session_id(&new_session_id()),
                None => new_session_id(),
            };
            let events = Arc::new(ServerEvents::new(short(&id), config.replay_buffer));
            let backend = Arc::new(aggregator::AggregateBackend::new(
                endpoint,
                short(&id),
                principal.clone(),
                pooled,
                events.clone(),
                config.max_requests_per_session,
                config.response_timeout,
            ));
            Ok((
                Arc::new(Session::new(id, principal, backend, events, pooled)),
                (),
            ))
        })?;
        self.metrics
            .sessions_created
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(session = %short(&session.id), "aggregate session started");
        let supervised = session.clone();
        let gateway = self.clone();
        tokio::spawn(async move {
            supervised.end.cancelled().await;
            supervised.fail_all("the session ended");
            tracing::info!(session = %short(&supervised.id), "aggregate session ended");
            supervised.record_duration(None);
            gateway.sessions.remove(&supervised.id);
        });
        Ok(session)
    }

    /// How this gateway's streams keep alive and end at shutdown.
    pub fn sse_timing(&self) -> SseTiming {
        SseTiming {
            keepalive: self.config.keepalive,
            closing: self.closing.clone(),
        }
    }

    /// The answer to a request the child could not be given (its queue full, or gone).
    pub fn undeliverable(&self, raw_id: &str, why: &Undeliverable) -> Response<Body> {
        undeliverable_response(
            self.config.response_timeout,
            self.config.child_queue,
            raw_id,
            why,
        )
    }
}

/// A request as the policy is asked about it.
pub struct Asked<'a> {
    pub session: &'a Arc<Session>,
    pub identity: &'a Arc<Principal>,
    pub client: &'a Client,
    pub method: &'a str,
    pub raw_id: &'a str,
    pub params: Option<&'a serde_json::Value>,
    /// The child speaks 2026-07-28 (a lookup of the gateway's own carries the envelope).
    pub modern_child: bool,
}

impl Gateway {
    /// The policy's verdict on a request (no policy: it passes).
    pub async fn police(&self, asked: Asked<'_>) -> Verdict {
        let Some(policing) = &self.config.policing else {
            return Verdict::Pass;
        };
        let policy = policing.current();
        let request = policing::Request {
            policy: &policy,
            principal: asked.identity,
            client: asked.client,
            server: self.config.command.server.as_deref().unwrap_or(""),
            endpoint: &self.config.path,
            method: asked.method,
            raw_id: asked.raw_id,
            params: asked.params,
            session: asked.session,
            modern_child: asked.modern_child,
            wait: self.config.response_timeout,
        };
        policing::check(&request).await
    }
}
