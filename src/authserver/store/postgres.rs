//! The shared store: PostgreSQL, so that several serve replicas see one set of grants.
//! A few connections (`--oauth-store-connections`) are kept; statements run on the
//! blocking pool through the synchronous client. TLS follows `pg_tls`: verified (against
//! the system's roots and any `sslrootcert`) to any host other than this machine.

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::sql::{SqlError, Tx, postgres_error};

/// A key for `pg_advisory_xact_lock`: replicas starting together migrate one at a time.
const MIGRATION_LOCK: i64 = 0x6d63_705f_7374_6f72; // "mcp_stor"

/// Connections waiting for the next transaction.
struct Idle(Mutex<Vec<postgres::Client>>);

impl Drop for Idle {
    /// A synchronous client closes its connection by running its own little runtime,
    /// which must not happen on an async worker: they are closed on a thread of their own.
    fn drop(&mut self) {
        let clients = std::mem::take(
            self.0
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !clients.is_empty() {
            std::thread::spawn(move || drop(clients));
        }
    }
}

#[derive(Clone)]
pub struct Postgres {
    config: postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    idle: Arc<Idle>,
    slots: Arc<Semaphore>,
}

impl Postgres {
    /// Connects and migrates. `url` is a `postgres://` URL or key=value string.
    pub async fn open(url: &str, connections: usize) -> Result<Self, SqlError> {
        // The command line refused a weak sslmode to another host already (unless it was
        // accepted); here it only says what to insist on.
        let protection = super::pg_tls::protection(url, true).map_err(SqlError)?;
        let dsn = crate::postgres_dsn::read(url);
        let mut config = postgres::Config::from_str(&dsn.text).map_err(|e| {
            SqlError(format!(
                "--oauth-store: not a PostgreSQL connection string ({e}); e.g. postgres://mcp@db.internal/mcp_stdio?sslmode=require"
            ))
        })?;
        config.ssl_mode(match protection {
            super::pg_tls::Protection::Required => postgres::config::SslMode::Require,
            super::pg_tls::Protection::Preferred => postgres::config::SslMode::Prefer,
            super::pg_tls::Protection::Disabled => postgres::config::SslMode::Disable,
        });
        let extra_roots = match &dsn.root_cert {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    SqlError(format!(
                        "--oauth-store sslrootcert {}: cannot read it ({e})",
                        path.display()
                    ))
                })?;
                crate::http::client::parse_extra_roots(&pem).map_err(|e| {
                    SqlError(format!(
                        "--oauth-store sslrootcert {}: {}",
                        path.display(),
                        e.trim_start_matches("--ca-cert: ")
                    ))
                })?
            }
            None => Vec::new(),
        };
        let tls = crate::http::client::tls_config(true, &extra_roots).map_err(SqlError)?;
        let store = Postgres {
            config,
            tls: tokio_postgres_rustls::MakeRustlsConnect::new(tls),
            idle: Arc::new(Idle(Mutex::new(Vec::new()))),
            slots: Arc::new(Semaphore::new(connections.max(1))),
        };
        store
            .transaction(|tx| {
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[MIGRATION_LOCK.into()])?;
                super::migrations::apply(tx).map(|_| ())
            })
            .await?;
        Ok(store)
    }

    /// Runs `work` in one transaction on a pooled connection (committed on `Ok`).
    pub async fn transaction<R, F>(&self, work: F) -> Result<R, SqlError>
    where
        R: Send + 'static,
        F: FnOnce(&mut dyn Tx) -> Result<R, SqlError> + Send + 'static,
    {
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SqlError("the store is closed".into()))?;
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut client = store.client()?;
            let result = (|| {
                let mut tx = client.transaction().map_err(postgres_error)?;
                let result = work(&mut tx)?;
                tx.commit().map_err(postgres_error)?;
                Ok(result)
            })();
            if !client.is_closed() {
                store
                    .idle
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(client);
            }
            result
        })
        .await
        .map_err(|e| SqlError(format!("the store's worker failed: {e}")))?
    }

    fn client(&self) -> Result<postgres::Client, SqlError> {
        let idle = self
            .idle
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match idle {
            Some(client) if !client.is_closed() => Ok(client),
            _ => self.config.connect(self.tls.clone()).map_err(|e| {
                SqlError(format!(
                    "cannot connect to the PostgreSQL store: {}",
                    postgres_error(e).0.trim_start_matches("postgres: ")
                ))
            }),
        }
    }
}
