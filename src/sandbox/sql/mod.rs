//! `read_only_sql` (issue 17, begun): what the sandbox will let a model ask a PostgreSQL
//! database. So far only the policy (`policy.rs`): a filter over sqlparser's model of the
//! query. The boundary will be the read-only transaction and the least-privilege role it
//! runs under; neither exists here yet, and no tool is registered.

pub mod policy;
