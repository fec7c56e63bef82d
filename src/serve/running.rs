//! A served stdio server's life: `Running` builds its gateway, starts the tasks that keep
//! it (idle reaping, spares, the embedded authorization server's housekeeping) and stops
//! them all.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::aggregator;
use super::auth;
use super::cluster;
use super::config::ServeConfig;
use super::gateway::Gateway;
use super::metrics;
use super::pool;
use super::sessions::{self, Sessions};
use super::spares;
use crate::authserver::AuthServer;

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
        Self::start_with(config, None, None).await
    }

    /// Builds a config file's server, whose authorization server (when `config` has one)
    /// is the listener's `shared` one.
    pub async fn start_sharing(
        config: ServeConfig,
        shared: Option<Arc<AuthServer>>,
    ) -> Result<Running, String> {
        Self::start_with(config, None, shared).await
    }

    /// Builds an aggregate endpoint's gateway (its sessions go to `endpoint`'s servers).
    pub async fn start_aggregate(
        config: ServeConfig,
        endpoint: Arc<aggregator::Endpoint>,
        shared: Option<Arc<AuthServer>>,
    ) -> Result<Running, String> {
        Self::start_with(config, Some(endpoint), shared).await
    }

    async fn start_with(
        config: ServeConfig,
        aggregate: Option<Arc<aggregator::Endpoint>>,
        shared: Option<Arc<AuthServer>>,
    ) -> Result<Running, String> {
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
        let tasks = task_table(&config);
        let (embedded, housekeeping) = match (config.auth_server.clone(), shared) {
            // The listener's own, kept by whoever opened it.
            (Some(_), Some(shared)) => (Some(shared), None),
            (Some(settings), None) => {
                let server = open_authorization_server(settings).await?;
                (Some(server.clone()), Some(keep_house(server)))
            }
            (None, _) => (None, None),
        };
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
            spares: spares::Spares::new(
                config.spares.clone(),
                spares::SpareLaunch {
                    command: config.command.clone(),
                    max_message_size: config.max_message_size,
                    child_queue: config.child_queue,
                    max_sessions: config.max_sessions,
                    child_grace: config.child_grace,
                },
            ),
            config,
            metrics: metrics::Metrics::default(),
            closing: CancellationToken::new(),
            draining: CancellationToken::new(),
            cluster,
            // An aggregate endpoint speaks the handshake era to the endpoints above it.
            era: tokio::sync::Mutex::new(
                aggregate
                    .is_some()
                    .then_some(super::child_era::ChildEra::Legacy),
            ),
            parked,
            tasks,
            aggregate,
        });
        // A config file's servers say which one is talking in every line they log.
        let span = gateway.config.span();
        let reaping = gateway.clone();
        let reaper = tokio::spawn(
            async move { sessions::reap(&reaping.sessions, reaping.config.session_idle_ttl).await }
                .instrument(span.clone()),
        );
        let keeping = gateway.clone();
        let keeper = tokio::spawn(
            async move {
                let open = || keeping.sessions.count();
                let (closing, draining) = (&keeping.closing, &keeping.draining);
                keeping.spares.keep(open, closing, draining).await;
            }
            .instrument(span),
        );
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
        // Tasks held for clients end with the gateway (their children are stopped next).
        self.gateway.tasks.clear();
        self.reaper.abort();
        if let Some(housekeeping) = self.housekeeping {
            housekeeping.cancel();
        }
        self.gateway
            .sessions
            .end_all(self.gateway.config.child_grace)
            .await;
        // The keeper saw `closing` and ends the spares; wait for them (bounded like sessions).
        let bound = self.gateway.config.child_grace * 2 + Duration::from_secs(1);
        let _ = tokio::time::timeout(bound, self.keeper).await;
    }
}

/// Opens the embedded authorization server (`--enable-oauth`) on its store.
pub async fn open_authorization_server(
    settings: crate::authserver::AuthServerConfig,
) -> Result<Arc<AuthServer>, String> {
    tracing::info!(
        store = %settings.store.describe(),
        "the embedded OAuth authorization server is on"
    );
    Ok(Arc::new(AuthServer::open(settings).await?))
}

/// The table of tasks held for clients; among replicas their ids are sealed around this
/// replica's name.
fn task_table(config: &ServeConfig) -> Arc<super::task_table::Tasks> {
    Arc::new(super::task_table::Tasks::new(
        config.max_tasks_per_principal,
        config.max_task_questions,
        config
            .cluster
            .as_ref()
            .map(|settings| crate::parking::Sealing {
                sealer: settings.key.sealer("task-id"),
                owner: settings.advertise.clone(),
            }),
    ))
}

/// Starts the authorization server's housekeeping; cancelling the token ends it.
pub fn keep_house(server: Arc<AuthServer>) -> CancellationToken {
    let closing = CancellationToken::new();
    let stop = closing.clone();
    tokio::spawn(async move { server.keep_house(closing).await });
    stop
}

/// Waits until a retired gateway (`draining` fired) has nothing left (no session of a
/// client, request or parked call), `grace` is up, or `closing` fires; false when the
/// grace ran out with something left.
pub async fn drained(gateway: &Gateway, grace: Duration, closing: &CancellationToken) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let busy = gateway.sessions.count_unpooled()
            + gateway.sessions.pending_requests()
            + gateway.parked.count();
        if busy == 0 {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = closing.cancelled() => return true,
        }
    }
}
