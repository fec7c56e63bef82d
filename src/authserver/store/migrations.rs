//! The schema, embedded in the binary and brought up to date at startup: each migration
//! runs once, in order, in the same transaction that records it.

use super::sql::{SqlError, Tx, Value};

/// Every migration, oldest first. A released one is never edited: add a new one.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/0001_grants.sql")),
    (2, include_str!("migrations/0002_groups.sql")),
];

/// The newest schema version this binary knows.
pub const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Applies what is missing; refuses a database a newer binary has migrated.
pub fn apply(tx: &mut dyn Tx) -> Result<i64, SqlError> {
    tx.batch("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)")?;
    let current = tx
        .query_one("SELECT MAX(version) FROM schema_migrations", &[])?
        .and_then(|row| row[0].int())
        .unwrap_or(0);
    if current > LATEST {
        return Err(SqlError(format!(
            "the store's schema is version {current}, newer than this mcp-stdio knows ({LATEST}); run the newer mcp-stdio or point --oauth-store elsewhere"
        )));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch(sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[Value::Int(*version), Value::Int(super::now())],
        )?;
    }
    Ok(LATEST)
}
