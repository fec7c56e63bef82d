//! The database `read_only_sql` asks: a few pooled connections (`--sql-connections`), each
//! opened with `default_transaction_read_only = on`, TLS as the DSN's `sslmode` says
//! (rustls, the system's roots and the DSN's `sslrootcert`). Every query runs inside `BEGIN READ ONLY` with a
//! transaction-local `statement_timeout` and is always rolled back. Errors are sorted by
//! SQLSTATE into what the caller can act on; the DSN never appears in any of them.
//! Synchronous: the sandbox runs its tools on blocking threads.

use std::str::FromStr;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use postgres::SimpleQueryMessage;

/// What `--sql-dsn` / `MCP_SQL_DSN` and the bounds say.
#[derive(Clone)]
pub struct DatabaseConfig {
    pub dsn: crate::secret::Secret,
    pub connections: usize,
}

impl std::fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("dsn", &"<redacted>")
            .field("connections", &self.connections)
            .finish()
    }
}

/// Why a query gave no rows, sorted by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// 57014: it ran past `--sql-timeout`.
    Timeout,
    /// 25006: it tried to write.
    ReadOnly(String),
    /// 42501: the role may not read it.
    AccessDenied(String),
    /// Classes 21, 22, 42, 0A, 54: the query itself is wrong.
    Invalid(String),
    /// Every connection stayed in use for the whole wait.
    Busy,
    /// Anything else: the connection or the server (details on stderr only).
    Server,
}

/// A query's answer: column names and types, and each row's values as PostgreSQL's text.
#[derive(Debug, Default)]
pub struct Answer {
    pub columns: Vec<(String, postgres::types::Type)>,
    pub rows: Vec<Vec<Option<String>>>,
}

pub struct Database {
    config: postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    pool: Mutex<Pool>,
    returned: Condvar,
    max: usize,
}

/// The connections: idle ones, and how many exist (idle or in use), at most `max`.
#[derive(Default)]
struct Pool {
    idle: Vec<postgres::Client>,
    open: usize,
    /// Callers waiting for a connection to come back (seen by the pool's test).
    waiting: usize,
}

impl Database {
    /// Reads the DSN (nothing is connected yet). Its text never reaches an error.
    pub fn new(settings: &DatabaseConfig) -> Result<Self, String> {
        let dsn = crate::postgres_dsn::read(settings.dsn.expose());
        let mut config = postgres::Config::from_str(&dsn.text).map_err(|_| {
            "--sql-dsn / MCP_SQL_DSN is not a PostgreSQL connection string this program reads; e.g. postgresql://mcp_reader@db.internal:5432/app?sslmode=verify-full (sslmode: disable, prefer, require, verify-ca or verify-full; sslrootcert: a PEM file)".to_owned()
        })?;
        // Every session reads only, whatever the role's own default.
        config.options("-c default_transaction_read_only=on");
        config.application_name("mcp-stdio read_only_sql");
        let roots = match &dsn.root_cert {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("sslrootcert '{}' cannot be read: {e}", path.display()))?;
                crate::http::client::parse_extra_roots(&pem).map_err(|e| {
                    e.replace("--ca-cert", &format!("sslrootcert '{}'", path.display()))
                })?
            }
            None => Vec::new(),
        };
        let tls = crate::http::client::tls_config(true, &roots)?;
        Ok(Database {
            config,
            tls: tokio_postgres_rustls::MakeRustlsConnect::new(tls),
            pool: Mutex::new(Pool::default()),
            returned: Condvar::new(),
            max: settings.connections.max(1),
        })
    }

    /// Runs a checked query in a read-only transaction that is always rolled back, with at
    /// most `timeout`; waits up to `wait` for a free connection.
    pub fn run(&self, sql: &str, timeout: Duration, wait: Duration) -> Result<Answer, QueryError> {
        let mut client = self.client(wait)?;
        let result = query(&mut client, sql, timeout);
        self.give_back(client);
        result
    }

    /// The server's version (`SHOW server_version`), for the receipt.
    pub fn server_version(&self, wait: Duration) -> Result<String, QueryError> {
        let mut client = self.client(wait)?;
        let version = client
            .simple_query("SHOW server_version")
            .ok()
            .and_then(|messages| {
                messages.into_iter().find_map(|m| match m {
                    SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
            })
            .ok_or(QueryError::Server);
        self.give_back(client);
        version
    }

    /// An idle connection, a new one while fewer than `max` exist, or the first one given
    /// back within `wait`.
    fn client(&self, wait: Duration) -> Result<postgres::Client, QueryError> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.waiting += 1;
        let (mut pool, _) = self
            .returned
            .wait_timeout_while(pool, wait, |pool| {
                pool.idle.is_empty() && pool.open >= self.max
            })
            .unwrap_or_else(|e| e.into_inner());
        pool.waiting -= 1;
        while let Some(client) = pool.idle.pop() {
            if !client.is_closed() {
                return Ok(client);
            }
            pool.open -= 1;
        }
        if pool.open >= self.max {
            tracing::warn!(
                max = self.max,
                "read_only_sql: every connection stayed busy (--sql-connections)"
            );
            return Err(QueryError::Busy);
        }
        pool.open += 1;
        drop(pool);
        self.config.connect(self.tls.clone()).map_err(|e| {
            self.pool.lock().unwrap_or_else(|e| e.into_inner()).open -= 1;
            self.returned.notify_one();
            tracing::error!(
                "read_only_sql: cannot connect to the database: {}",
                describe(&e)
            );
            QueryError::Server
        })
    }

    fn give_back(&self, client: postgres::Client) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if client.is_closed() {
            pool.open -= 1;
        } else {
            pool.idle.push(client);
        }
        drop(pool);
        self.returned.notify_one();
    }
}

impl Drop for Database {
    /// A synchronous client closes its connection with a runtime of its own, which must
    /// not run on an async worker: they are closed on a thread of their own.
    fn drop(&mut self) {
        let pool = self.pool.get_mut().unwrap_or_else(|e| e.into_inner());
        let clients = std::mem::take(&mut pool.idle);
        if !clients.is_empty() {
            std::thread::spawn(move || drop(clients));
        }
    }
}

fn query(
    client: &mut postgres::Client,
    sql: &str,
    timeout: Duration,
) -> Result<Answer, QueryError> {
    let mut tx = client
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(sorted)?;
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {}",
        timeout.as_millis().max(1)
    ))
    .map_err(sorted)?;
    // The types come from preparing it; the values as the server's text from the simple
    // protocol (every type has a text form; none needs a Rust decoder).
    let statement = tx.prepare(sql).map_err(sorted)?;
    let columns = statement
        .columns()
        .iter()
        .map(|c| (c.name().to_owned(), c.type_().clone()))
        .collect();
    let messages = tx.simple_query(sql).map_err(sorted)?;
    let rows = messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_owned))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    // Dropping a transaction rolls it back; said explicitly, so a failure shows.
    tx.rollback().map_err(sorted)?;
    Ok(Answer { columns, rows })
}

/// A server error by its SQLSTATE class; anything else is the server's problem.
fn sorted(e: postgres::Error) -> QueryError {
    let Some(db) = e.as_db_error() else {
        tracing::error!(
            "read_only_sql: the database connection failed: {}",
            describe(&e)
        );
        return QueryError::Server;
    };
    let code = db.code().code();
    let message = db.message().to_owned();
    match code {
        "57014" => QueryError::Timeout,
        "25006" => QueryError::ReadOnly(message),
        "42501" => QueryError::AccessDenied(message),
        _ if ["21", "22", "42", "0A", "54"]
            .iter()
            .any(|c| code.starts_with(c)) =>
        {
            QueryError::Invalid(message)
        }
        _ => {
            tracing::error!(
                sqlstate = code,
                "read_only_sql: the database failed: {message}"
            );
            QueryError::Server
        }
    }
}

/// A client error for the log: its own words and its cause's (never the DSN).
fn describe(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    //! Each layer of the boundary on its own, against the PostgreSQL server `scripts/test-all`
    //! starts (`MCP_STDIO_TEST_POSTGRES`; required when `CI` is set). A write the policy
    //! cannot see (a function that inserts) is what each layer must stop by itself.

    use super::*;

    /// A fresh database with a table and a function that writes to it; `None` without a
    /// server (outside CI).
    fn database() -> Option<String> {
        let url = match std::env::var("MCP_STDIO_TEST_POSTGRES") {
            Ok(url) => url,
            Err(_) if std::env::var_os("CI").is_some() => {
                panic!(
                    "MCP_STDIO_TEST_POSTGRES is not set: scripts/test-all starts a PostgreSQL server"
                )
            }
            Err(_) => return None,
        };
        let name = format!("ro_{}", std::process::id()) + &format!("_{}", rand_suffix());
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let url = format!("{}/{name}", url.rsplit_once('/').unwrap().0);
        let mut owner = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        owner
            .batch_execute(
                "CREATE TABLE t (a int);
                 CREATE FUNCTION bump() RETURNS int LANGUAGE sql AS 'INSERT INTO t VALUES (1) RETURNING a';",
            )
            .unwrap();
        Some(url)
    }

    fn rand_suffix() -> String {
        let mut bytes = [0u8; 4];
        aws_lc_rs::rand::fill(&mut bytes).unwrap();
        ::hex::encode(bytes)
    }

    fn rows_in_t(url: &str) -> i64 {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        client
            .query_one("SELECT count(*) FROM t", &[])
            .unwrap()
            .get(0)
    }

    #[test]
    fn the_read_only_transaction_alone_stops_a_write_the_policy_cannot_see() {
        let Some(url) = database() else { return };
        // A plain connection: no session default, so only BEGIN READ ONLY stands in the way.
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let refused = query(&mut client, "SELECT bump()", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(refused, QueryError::ReadOnly(_)), "{refused:?}");
        assert_eq!(rows_in_t(&url), 0);
        let fine = query(&mut client, "SELECT 1 AS one", Duration::from_secs(5)).unwrap();
        assert_eq!(fine.rows, vec![vec![Some("1".to_owned())]]);
    }

    #[test]
    fn every_pooled_connection_reads_only_by_default() {
        let Some(url) = database() else { return };
        let database = Database::new(&DatabaseConfig {
            dsn: crate::secret::Secret::new(url.clone()),
            connections: 1,
        })
        .unwrap();
        let mut client = database.client(Duration::from_secs(5)).unwrap();
        let shown = client
            .query_one("SHOW default_transaction_read_only", &[])
            .unwrap()
            .get::<_, String>(0);
        assert_eq!(shown, "on");
        // Outside any transaction of ours, the session default stops the write too.
        let error = client.query("SELECT bump()", &[]).unwrap_err();
        assert_eq!(error.code().map(|c| c.code()), Some("25006"));
        database.give_back(client);
        assert_eq!(rows_in_t(&url), 0);
    }

    #[test]
    fn the_pool_is_bounded_and_a_waiter_gets_the_connection_given_back() {
        let Some(url) = database() else { return };
        let database = Database::new(&DatabaseConfig {
            dsn: crate::secret::Secret::new(url),
            connections: 1,
        })
        .unwrap();
        let held = database.client(Duration::from_secs(5)).unwrap();
        assert!(
            matches!(
                database.client(Duration::from_millis(100)),
                Err(QueryError::Busy)
            ),
            "--sql-connections 1 is in use"
        );
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                database.run("SELECT 2", Duration::from_secs(5), Duration::from_secs(10))
            });
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while database.pool.lock().unwrap().waiting == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the waiter never waited"
                );
                std::thread::yield_now();
            }
            database.give_back(held);
            assert!(
                waiter.join().unwrap().is_ok(),
                "the waiter got the connection back"
            );
        });
    }
}
