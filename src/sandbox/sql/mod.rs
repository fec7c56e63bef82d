//! `read_only_sql`: what the sandbox lets a model ask a PostgreSQL database. The policy
//! (`policy.rs`) is a filter over sqlparser's model of the query; the boundary is the
//! read-only transaction and the least-privilege role it runs under (`database.rs`); the
//! rows are turned into JSON by their types (`rows.rs`); `src/postgres_dsn.rs` (shared with
//! serve's store) reads libpq's TLS settings the driver does not.

pub mod database;
pub mod policy;
pub mod rows;
