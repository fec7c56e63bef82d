//! Where the embedded authorization server keeps its clients, codes, grants and tokens: a
//! real database with transactions (SQLite by default, PostgreSQL to share it between
//! replicas). Every rule that must hold under concurrency — a code redeemed once, a
//! refresh token rotated once, a replay revoking its whole family — is one transaction
//! here, written once over `sql::Tx` for both databases. Tokens and codes arrive already
//! hashed; no secret value is ever stored.

mod migrations;
mod postgres;
mod sql;
mod sqlite;
#[cfg(test)]
mod tests;

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
    /// Registered clients; the oldest is recycled (its grants revoked) past this.
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
    Issued(Grant),
    /// Never issued (or long forgotten).
    Unknown,
    Expired,
    /// Already used: the grant it produced is revoked, every token of it.
    Replayed,
    /// The grant was revoked.
    Revoked,
    /// Present but not for this request (wrong client, redirect or verifier); spent.
    Refused(E),
}

/// What a revocation found.
#[derive(Debug, PartialEq, Eq)]
pub enum Revoked {
    /// A refresh token: its grant and every token of it.
    Grant,
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
    crate::serve::authserver::random_token()
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

    /// Records a registered client (its metadata as JSON). Past `max_clients`, the oldest
    /// are forgotten and their grants revoked.
    pub async fn register_client(
        &self,
        client_id: String,
        metadata: String,
    ) -> Result<(), SqlError> {
        let max = self.limits.max_clients as i64;
        self.transaction(move |tx| {
            let now = now();
            tx.execute(
                "INSERT INTO clients (client_id, metadata, created_us) VALUES ($1, $2, $3)",
                &[client_id.into(), metadata.into(), now_us().into()],
            )?;
            let count = count(tx, "SELECT COUNT(*) FROM clients", &[])?;
            if count > max {
                let oldest = tx.query(
                    "SELECT client_id FROM clients ORDER BY created_us, client_id LIMIT $1",
                    &[(count - max).into()],
                )?;
                for row in oldest {
                    let id = row[0].clone();
                    tx.execute("UPDATE grants SET revoked_at = $1 WHERE client_id = $2 AND revoked_at IS NULL", &[now.into(), id.clone()])?;
                    tx.execute("DELETE FROM clients WHERE client_id = $1", &[id])?;
                }
            }
            Ok(())
        })
        .await
    }

    /// A registered client's metadata.
    pub async fn client(&self, client_id: String) -> Result<Option<String>, SqlError> {
        self.transaction(move |tx| {
            Ok(tx
                .query_one(
                    "SELECT metadata FROM clients WHERE client_id = $1",
                    &[client_id.into()],
                )?
                .and_then(|row| row[0].text().map(str::to_owned)))
        })
        .await
    }

    /// Stores a new code (by hash). `Ok(false)`: too many codes wait to be redeemed.
    pub async fn add_code(&self, code_hash: String, code: Code) -> Result<bool, SqlError> {
        let max = self.limits.max_pending_codes as i64;
        self.transaction(move |tx| {
            let now = now();
            tx.execute(
                "DELETE FROM codes WHERE used_at IS NULL AND expires_at < $1",
                &[now.into()],
            )?;
            let pending = count(
                tx,
                "SELECT COUNT(*) FROM codes WHERE used_at IS NULL",
                &[],
            )?;
            if pending >= max {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO codes (code_hash, client_id, principal, scope, resource, redirect_uri, code_challenge, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    code_hash.into(),
                    code.client_id.into(),
                    code.principal.into(),
                    code.scope.into(),
                    code.resource.into(),
                    code.redirect_uri.into(),
                    code.code_challenge.into(),
                    code.expires_at.into(),
                ],
            )?;
            Ok(true)
        })
        .await
    }

    /// Redeems a code once. The code is spent whatever `check` says (a wrong verifier
    /// burns it); a second redemption revokes the grant the first one made.
    pub async fn redeem_code<E, C>(
        &self,
        code_hash: String,
        check: C,
        issue: Issue,
    ) -> Result<Redeemed<E>, SqlError>
    where
        E: Send + 'static,
        C: FnOnce(&Code) -> Result<(), E> + Send + 'static,
    {
        let max_grants = self.limits.max_grants as i64;
        self.transaction(move |tx| {
            let now = now();
            let taken = tx.query_one(
                "UPDATE codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL RETURNING client_id, principal, scope, resource, redirect_uri, code_challenge, expires_at",
                &[now.into(), code_hash.clone().into()],
            )?;
            let Some(row) = taken else {
                let spent = tx.query_one("SELECT grant_id FROM codes WHERE code_hash = $1", &[code_hash.into()])?;
                return match spent {
                    Some(row) => {
                        if let Some(grant_id) = row[0].text() {
                            revoke_grant(tx, grant_id, now)?;
                        }
                        Ok(Redeemed::Replayed)
                    }
                    None => Ok(Redeemed::Unknown),
                };
            };
            let code = Code {
                client_id: text(&row[0]),
                principal: text(&row[1]),
                scope: text(&row[2]),
                resource: text(&row[3]),
                redirect_uri: text(&row[4]),
                code_challenge: text(&row[5]),
                expires_at: row[6].int().unwrap_or(0),
            };
            if code.expires_at < now {
                return Ok(Redeemed::Expired);
            }
            if let Err(e) = check(&code) {
                return Ok(Redeemed::Refused(e));
            }
            let grant = Grant {
                grant_id: new_grant_id(),
                client_id: code.client_id,
                principal: code.principal,
                scope: code.scope,
                resource: code.resource,
            };
            tx.execute(
                "INSERT INTO grants (grant_id, client_id, principal, scope, resource, created_us, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    grant.grant_id.clone().into(),
                    grant.client_id.clone().into(),
                    grant.principal.clone().into(),
                    grant.scope.clone().into(),
                    grant.resource.clone().into(),
                    now_us().into(),
                    issue.refresh_expires_at.into(),
                ],
            )?;
            tx.execute("UPDATE codes SET grant_id = $1 WHERE code_hash = $2", &[grant.grant_id.clone().into(), code_hash.into()])?;
            insert_tokens(tx, &grant.grant_id, &issue, now, 0)?;
            evict_grants(tx, max_grants, now)?;
            Ok(Redeemed::Issued(grant))
        })
        .await
    }

    /// Rotates a refresh token once: the old one is spent, a new pair issued. A spent one
    /// presented again revokes its grant.
    pub async fn rotate_refresh<E, C>(
        &self,
        refresh_hash: String,
        check: C,
        issue: Issue,
    ) -> Result<Redeemed<E>, SqlError>
    where
        E: Send + 'static,
        C: FnOnce(&Grant) -> Result<(), E> + Send + 'static,
    {
        self.transaction(move |tx| {
            let now = now();
            let taken = tx.query_one(
                "UPDATE tokens SET used_at = $1 WHERE token_hash = $2 AND kind = 'refresh' AND used_at IS NULL RETURNING grant_id, expires_at",
                &[now.into(), refresh_hash.clone().into()],
            )?;
            let Some(row) = taken else {
                let spent = tx.query_one(
                    "SELECT grant_id FROM tokens WHERE token_hash = $1 AND kind = 'refresh'",
                    &[refresh_hash.into()],
                )?;
                return match spent {
                    Some(row) => {
                        revoke_grant(tx, &text(&row[0]), now)?;
                        Ok(Redeemed::Replayed)
                    }
                    None => Ok(Redeemed::Unknown),
                };
            };
            let grant_id = text(&row[0]);
            if row[1].int().unwrap_or(0) < now {
                return Ok(Redeemed::Expired);
            }
            let Some(grant) = live_grant(tx, &grant_id)? else {
                return Ok(Redeemed::Revoked);
            };
            if let Err(e) = check(&grant) {
                // Not this client's (or not this request's) token: nothing changes, so a
                // stolen refresh token tried elsewhere does not spend the owner's.
                tx.execute(
                    "UPDATE tokens SET used_at = NULL WHERE token_hash = $1",
                    &[refresh_hash.into()],
                )?;
                return Ok(Redeemed::Refused(e));
            }
            // One rotation's overlap: the access token issued just before stays valid (a
            // request may be in flight with it); older ones of this grant end now. So a
            // grant never has more than two live access tokens.
            let generation = tx
                .query_one(
                    "UPDATE grants SET generation = generation + 1, expires_at = $1 WHERE grant_id = $2 RETURNING generation",
                    &[issue.refresh_expires_at.into(), grant_id.clone().into()],
                )?
                .and_then(|row| row[0].int())
                .unwrap_or(0);
            tx.execute(
                "DELETE FROM tokens WHERE grant_id = $1 AND kind = 'access' AND generation < $2",
                &[grant_id.clone().into(), (generation - 1).into()],
            )?;
            insert_tokens(tx, &grant_id, &issue, now, generation)?;
            Ok(Redeemed::Issued(grant))
        })
        .await
    }

    /// The grant behind a live access token.
    pub async fn access(&self, access_hash: String) -> Result<Option<(Grant, i64)>, SqlError> {
        self.transaction(move |tx| {
            let row = tx.query_one(
                "SELECT g.grant_id, g.client_id, g.principal, g.scope, g.resource, t.expires_at FROM tokens t JOIN grants g ON g.grant_id = t.grant_id WHERE t.token_hash = $1 AND t.kind = 'access' AND t.expires_at > $2 AND g.revoked_at IS NULL",
                &[access_hash.into(), now().into()],
            )?;
            Ok(row.map(|row| {
                let grant = Grant {
                    grant_id: text(&row[0]),
                    client_id: text(&row[1]),
                    principal: text(&row[2]),
                    scope: text(&row[3]),
                    resource: text(&row[4]),
                };
                (grant, row[5].int().unwrap_or(0))
            }))
        })
        .await
    }

    /// RFC 7009: a refresh token ends its grant; an access token ends itself. Only a
    /// token of `client_id` is revoked.
    pub async fn revoke(&self, token_hash: String, client_id: String) -> Result<Revoked, SqlError> {
        self.transaction(move |tx| {
            let now = now();
            let row = tx.query_one(
                "SELECT t.kind, t.grant_id FROM tokens t JOIN grants g ON g.grant_id = t.grant_id WHERE t.token_hash = $1 AND g.client_id = $2",
                &[token_hash.clone().into(), client_id.into()],
            )?;
            let Some(row) = row else { return Ok(Revoked::Nothing) };
            if row[0].text() == Some("refresh") {
                revoke_grant(tx, &text(&row[1]), now)?;
                Ok(Revoked::Grant)
            } else {
                tx.execute("DELETE FROM tokens WHERE token_hash = $1", &[token_hash.into()])?;
                Ok(Revoked::Access)
            }
        })
        .await
    }

    /// Forgets what can no longer matter: expired tokens and codes, and grants that are
    /// revoked or past their refresh lifetime (with their tokens and codes).
    pub async fn collect_garbage(&self) -> Result<(), SqlError> {
        self.transaction(move |tx| {
            let now = now();
            tx.execute("DELETE FROM tokens WHERE expires_at < $1", &[now.into()])?;
            tx.execute("DELETE FROM grants WHERE revoked_at IS NOT NULL OR expires_at < $1", &[now.into()])?;
            tx.execute("DELETE FROM tokens WHERE grant_id NOT IN (SELECT grant_id FROM grants)", &[])?;
            tx.execute(
                "DELETE FROM codes WHERE expires_at < $1 AND (grant_id IS NULL OR grant_id NOT IN (SELECT grant_id FROM grants))",
                &[now.into()],
            )?;
            Ok(())
        })
        .await
    }

    /// Revokes the grants and drops the codes of metadata-document clients (ids that are
    /// https URLs) not in `allowed`; how many clients that was.
    pub async fn end_document_clients_except(
        &self,
        allowed: Vec<String>,
    ) -> Result<usize, SqlError> {
        self.transaction(move |tx| {
            let now = now();
            let rows = tx.query(
                "SELECT DISTINCT client_id FROM grants WHERE revoked_at IS NULL AND client_id LIKE 'https://%' UNION SELECT DISTINCT client_id FROM codes WHERE used_at IS NULL AND client_id LIKE 'https://%'",
                &[],
            )?;
            let mut ended = 0;
            for row in rows {
                let id = text(&row[0]);
                if allowed.contains(&id) {
                    continue;
                }
                tx.execute(
                    "UPDATE grants SET revoked_at = $1 WHERE client_id = $2 AND revoked_at IS NULL",
                    &[now.into(), id.clone().into()],
                )?;
                tx.execute("DELETE FROM tokens WHERE kind = 'access' AND grant_id IN (SELECT grant_id FROM grants WHERE client_id = $1)", &[id.clone().into()])?;
                tx.execute("DELETE FROM codes WHERE client_id = $1 AND used_at IS NULL", &[id.into()])?;
                ended += 1;
            }
            Ok(ended)
        })
        .await
    }

    /// Live grants (for tests and the metrics).
    pub async fn live_grants(&self) -> Result<i64, SqlError> {
        self.transaction(|tx| {
            count(
                tx,
                "SELECT COUNT(*) FROM grants WHERE revoked_at IS NULL",
                &[],
            )
        })
        .await
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
        "SELECT grant_id, client_id, principal, scope, resource FROM grants WHERE grant_id = $1 AND revoked_at IS NULL",
        &[grant_id.into()],
    )?;
    Ok(row.map(|row| Grant {
        grant_id: text(&row[0]),
        client_id: text(&row[1]),
        principal: text(&row[2]),
        scope: text(&row[3]),
        resource: text(&row[4]),
    }))
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
fn evict_grants(tx: &mut dyn Tx, max: i64, now: i64) -> Result<(), SqlError> {
    let live = count(
        tx,
        "SELECT COUNT(*) FROM grants WHERE revoked_at IS NULL",
        &[],
    )?;
    if live <= max {
        return Ok(());
    }
    let victims = tx.query(
        "SELECT grant_id FROM grants WHERE revoked_at IS NULL ORDER BY expires_at, created_us LIMIT $1",
        &[(live - max).into()],
    )?;
    for row in victims {
        revoke_grant(tx, &text(&row[0]), now)?;
    }
    Ok(())
}
