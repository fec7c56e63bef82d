//! Where the embedded authorization server keeps its clients, codes, grants and tokens: a
//! real database with transactions (SQLite by default, PostgreSQL to share it between
//! replicas). Every rule that must hold under concurrency — a code redeemed once, a
//! refresh token rotated once, a replay revoking its whole family — is one transaction
//! here, written once over `sql::Tx` for both databases. Tokens and codes arrive already
//! hashed; no secret value is ever stored.

mod clients;
mod codes;
mod housekeeping;
mod migrations;
pub mod pg_tls;
mod postgres;
mod sql;
mod sqlite;
#[cfg(test)]
mod tests;
mod tokens;

use std::path::PathBuf;

pub use sql::SqlError;
use sql::{Tx, Value};

/// `--oauth-store`: where the state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    /// A `postgres://` URL (it may hold a password: never logged).
    Postgres(String),
}

impl Location {
    /// `sqlite:PATH` or `postgres://…` / `postgresql://…`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if let Some(path) = raw.strip_prefix("sqlite:") {
            let path = path.trim_start_matches("//");
            if path.is_empty() {
                return Err(
                    "--oauth-store sqlite: needs a file, e.g. sqlite:/var/lib/mcp-stdio/oauth.db"
                        .into(),
                );
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            return Ok(Location::Postgres(raw.to_owned()));
        }
        Err("--oauth-store must be sqlite:PATH (one file, the default) or postgres://USER@HOST/DB (shared by replicas)".into())
    }

    /// For the startup log: the path, or the PostgreSQL host and database only.
    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(path) => format!("sqlite:{}", path.display()),
            Location::Postgres(url) => match url::Url::parse(url) {
                Ok(url) => format!(
                    "postgres://{}{}",
                    url.host_str().unwrap_or("localhost"),
                    url.path()
                ),
                Err(_) => "postgres".into(),
            },
        }
    }
}

/// Bounds on what the store holds (each a flag).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Registered clients; at this many, the oldest one not in use makes room, and when
    /// all are in use a registration is refused.
    pub max_clients: usize,
    /// Live grants; the one expiring soonest is revoked past this.
    pub max_grants: usize,
    /// Codes issued and not yet redeemed; a new one is refused past this.
    pub max_pending_codes: usize,
    /// `--oauth-store-connections` (PostgreSQL).
    pub connections: usize,
}

#[derive(Clone)]
enum Database {
    Sqlite(sqlite::Sqlite),
    Postgres(Box<postgres::Postgres>),
}

#[derive(Clone)]
pub struct Store {
    database: Database,
    limits: Limits,
}

/// A grant: what one user let one client do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub grant_id: String,
    pub client_id: String,
    pub principal: String,
    pub scope: String,
    pub resource: String,
    /// The user's groups at consent (`--trusted-groups-header`).
    pub groups: Vec<String>,
}

/// A code as issued at the consent step, bound to everything the token request must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    pub client_id: String,
    pub principal: String,
    pub scope: String,
    pub resource: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub expires_at: i64,
    pub groups: Vec<String>,
}

/// The tokens a successful grant or refresh hands out, hashed.
#[derive(Debug, Clone)]
pub struct Issue {
    pub access_hash: String,
    pub access_expires_at: i64,
    pub refresh_hash: String,
    pub refresh_expires_at: i64,
}

/// What redeeming a code or a refresh token came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Redeemed<E> {
    /// The grant, and the older grants revoked to make room for it (`--oauth-max-grants`).
    Issued(Grant, Vec<String>),
    /// Never issued (or long forgotten).
    Unknown,
    Expired,
    /// Already used: the grant it produced (if it produced one) is revoked, every token of it.
    Replayed(Option<String>),
    /// The grant was revoked.
    Revoked,
    /// Present but not for this request (wrong client, redirect or verifier); spent.
    Refused(E),
}

/// What a revocation found.
#[derive(Debug, PartialEq, Eq)]
pub enum Revoked {
    /// A refresh token: its grant (this id) and every token of it.
    Grant(String),
    /// An access token: that token.
    Access,
    /// Nothing by that value (RFC 7009: still a success for the client).
    Nothing,
}

/// Microseconds since the epoch (orders registrations and grants made in one second).
fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A new random identifier for a grant (not a secret).
fn new_grant_id() -> String {
    crate::authserver::opaque::random_token()
}

impl Store {
    pub async fn open(location: &Location, limits: Limits) -> Result<Self, SqlError> {
        let database = match location {
            Location::Sqlite(path) => Database::Sqlite(sqlite::Sqlite::open(path)?),
            Location::Postgres(url) => Database::Postgres(Box::new(
                postgres::Postgres::open(url, limits.connections).await?,
            )),
        };
        Ok(Store { database, limits })
    }

    async fn transaction<R, F>(&self, work: F) -> Result<R, SqlError>
    where
        R: Send + 'static,
        F: FnOnce(&mut dyn Tx) -> Result<R, SqlError> + Send + 'static,
    {
        match &self.database {
            Database::Sqlite(db) => db.transaction(work).await,
            Database::Postgres(db) => db.transaction(work).await,
        }
    }
}

fn text(value: &Value) -> String {
    value.text().unwrap_or_default().to_owned()
}

fn count(tx: &mut dyn Tx, sql: &str, params: &[Value]) -> Result<i64, SqlError> {
    Ok(tx
        .query_one(sql, params)?
        .and_then(|row| row[0].int())
        .unwrap_or(0))
}

fn live_grant(tx: &mut dyn Tx, grant_id: &str) -> Result<Option<Grant>, SqlError> {
    let row = tx.query_one(
        "SELECT grant_id, client_id, principal, scope, resource, groups FROM grants WHERE grant_id = $1 AND revoked_at IS NULL",
        &[grant_id.into()],
    )?;
    Ok(row.map(|row| Grant {
        grant_id: text(&row[0]),
        client_id: text(&row[1]),
        principal: text(&row[2]),
        scope: text(&row[3]),
        resource: text(&row[4]),
        groups: groups_from(&row[5]),
    }))
}

/// A stored group list (a JSON array of strings); anything else is no groups.
fn groups_from(value: &Value) -> Vec<String> {
    value
        .text()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// A group list as stored.
fn groups_text(groups: &[String]) -> String {
    serde_json::to_string(groups).unwrap_or_else(|_| "[]".into())
}

/// Ends a grant: every token of it, now.
fn revoke_grant(tx: &mut dyn Tx, grant_id: &str, now: i64) -> Result<(), SqlError> {
    tx.execute(
        "UPDATE grants SET revoked_at = $1 WHERE grant_id = $2 AND revoked_at IS NULL",
        &[now.into(), grant_id.into()],
    )?;
    tx.execute(
        "DELETE FROM tokens WHERE grant_id = $1 AND kind = 'access'",
        &[grant_id.into()],
    )?;
    Ok(())
}

fn insert_tokens(
    tx: &mut dyn Tx,
    grant_id: &str,
    issue: &Issue,
    now: i64,
    generation: i64,
) -> Result<(), SqlError> {
    for (hash, kind, expires) in [
        (&issue.access_hash, "access", issue.access_expires_at),
        (&issue.refresh_hash, "refresh", issue.refresh_expires_at),
    ] {
        tx.execute(
            "INSERT INTO tokens (token_hash, grant_id, kind, generation, issued_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[hash.as_str().into(), grant_id.into(), kind.into(), generation.into(), now.into(), expires.into()],
        )?;
    }
    Ok(())
}

/// Past `max` live grants, the ones expiring soonest are revoked.
fn evict_grants(tx: &mut dyn Tx, max: i64, now: i64) -> Result<Vec<String>, SqlError> {
    let live = count(
        tx,
        "SELECT COUNT(*) FROM grants WHERE revoked_at IS NULL",
        &[],
    )?;
    if live <= max {
        return Ok(Vec::new());
    }
    let victims = tx.query(
        "SELECT grant_id FROM grants WHERE revoked_at IS NULL ORDER BY expires_at, created_us LIMIT $1",
        &[(live - max).into()],
    )?;
    let mut evicted = Vec::with_capacity(victims.len());
    for row in victims {
        let grant_id = text(&row[0]);
        revoke_grant(tx, &grant_id, now)?;
        evicted.push(grant_id);
    }
    Ok(evicted)
}
