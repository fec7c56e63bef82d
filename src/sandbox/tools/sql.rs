//! `read_only_sql`: one query through the policy, run read-only against the configured
//! database, its rows as JSON with their types, and a receipt (the SQL that ran, its
//! sha256, the row count, whether our caps withheld rows, the server's version). Refusals carry the
//! stable code of what went wrong and what to change.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Context, Failure, Output, ToolResult, sha256, string_arg, u64_arg};
use crate::sandbox::problem::Problem;
use crate::sandbox::sql::database::{Database, QueryError};
use crate::sandbox::sql::policy::{self, Refusal};
use crate::sandbox::sql::rows;

/// The database and the bounds of `read_only_sql`.
pub struct Sql {
    pub database: Database,
    /// `--sql-max-rows`: the outer LIMIT is at most this.
    pub max_rows: u64,
    /// `--sql-max-bytes`: rows are cut beyond this much JSON.
    pub max_bytes: usize,
    /// `--sql-timeout`: the transaction's `statement_timeout`.
    pub timeout: Duration,
    version: OnceLock<String>,
}

impl Sql {
    pub fn new(database: Database, max_rows: u64, max_bytes: usize, timeout: Duration) -> Self {
        Sql {
            database,
            max_rows,
            max_bytes,
            timeout,
            version: OnceLock::new(),
        }
    }
}

pub fn read_only_sql(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let Some(sql) = context.sql else {
        return Err(Failure::new(
            Problem::Internal,
            "read_only_sql has no database",
            "start the sandbox with --sql-dsn or MCP_SQL_DSN",
        ));
    };
    let query = string_arg(arguments, "query").unwrap_or_default();
    let max_rows = u64_arg(arguments, "max_rows").map_or(sql.max_rows, |n| n.min(sql.max_rows));
    let checked = policy::check(query, max_rows).map_err(|refusal| match refusal {
        Refusal::Violation(why) => Failure::new(
            Problem::QueryViolation,
            why,
            "send one read-only SELECT without bind parameters",
        )
        .on("query"),
        Refusal::Invalid(why) => Failure::new(
            Problem::Validation,
            why,
            "send one SELECT in PostgreSQL syntax",
        )
        .on("query"),
    })?;
    let left = context.deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(context
            .stop()
            .unwrap_or_else(|| Failure::new(Problem::Timeout, "out of time", "try again")));
    }
    let timeout = sql.timeout.min(left);
    let answer = sql
        .database
        .run(&checked.sql, timeout, left)
        .map_err(|e| failure(e, timeout))?;
    let version = match sql.version.get() {
        Some(version) => version.clone(),
        None => {
            let version = sql.database.server_version(left).unwrap_or_default();
            sql.version.get_or_init(|| version).clone()
        }
    };
    // The LIMIT bounds what the database sends; this bounds what we return whatever it sent.
    // A row past the limit exists only when the cap asked one further: the cap withheld it.
    let mut answer_rows = answer.rows;
    let cap_withheld = checked.capped && answer_rows.len() as u64 > checked.limit;
    answer_rows.truncate(usize::try_from(checked.limit).unwrap_or(usize::MAX));
    let table = rows::table(&answer.columns, answer_rows, sql.max_bytes);
    let row_count = table.rows.len();
    let text = table
        .rows
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    // Only our caps (--sql-max-rows, max_rows, --sql-max-bytes) make a result truncated:
    // a query that asked for 10 rows and got 10 got everything it asked for.
    let truncated = table.truncated || cap_withheld;
    Ok(Output {
        text,
        structured: json!({
            "columns": table.columns,
            "rows": table.rows,
            "row_count": row_count,
            "truncated": truncated,
            "receipt": {
                "sql": checked.sql,
                "sha256": sha256(checked.sql.as_bytes()),
                "row_count": row_count,
                "limit": checked.limit,
                "truncated": truncated,
                "server_version": version,
            },
        }),
        untrusted: Some("the database".into()),
    })
}

fn failure(error: QueryError, timeout: Duration) -> Failure {
    match error {
        QueryError::Timeout => Failure::new(
            Problem::Timeout,
            format!(
                "the query ran past {} s (--sql-timeout)",
                timeout.as_secs_f64()
            ),
            "narrow it: fewer rows, an indexed condition, no cross joins",
        ),
        QueryError::ReadOnly(why) => Failure::new(
            Problem::QueryViolation,
            format!("the database refused a write: {why}"),
            "only reading is allowed",
        )
        .on("query"),
        QueryError::AccessDenied(why) => Failure::new(
            Problem::AccessDenied,
            format!("the database role may not read this: {why}"),
            "query only the tables and views the role was granted",
        )
        .on("query"),
        QueryError::Invalid(why) => Failure::new(
            Problem::Validation,
            format!("the database refused the query: {why}"),
            "fix the query (names, types, syntax) and try again",
        )
        .on("query"),
        QueryError::Busy => Failure::new(
            Problem::Busy,
            "every database connection stayed busy (--sql-connections)",
            "try again shortly",
        ),
        // The details went to stderr where the failure happened; the caller learns only
        // that the server failed.
        QueryError::Server => Failure::new(
            Problem::Internal,
            "the database could not be reached or failed",
            "try again later; the operator finds the details in the server's log",
        ),
    }
}
