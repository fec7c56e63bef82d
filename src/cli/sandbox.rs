//! `mcp-stdio sandbox`: its flags and their validation into a `SandboxConfig`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{non_negative_seconds, positive_seconds};
use crate::logging::{LogFormat, LogLevel};
use crate::sandbox::{Limits, SandboxConfig};

#[derive(Debug, Args, Clone)]
pub struct SandboxArgs {
    /// The directory to serve, read-only (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// A glob added to the denylist (matched against the resolved relative path). Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub deny: Vec<String>,

    /// A glob exempted from the denylist. Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub allow: Vec<String>,

    /// Most bytes one read returns (and one file a search reads).
    #[arg(long, value_name = "BYTES", default_value = "1048576", value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    pub max_read_bytes: u64,

    /// Most matches one search returns.
    #[arg(long, value_name = "N", default_value = "200", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_matches: u64,

    /// Most files one search walks.
    #[arg(long, value_name = "N", default_value = "10000", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_files: u64,

    /// Most entries one listing returns.
    #[arg(long, value_name = "N", default_value = "2000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_entries: u64,

    /// Largest file file_info hashes, in bytes.
    #[arg(long, value_name = "BYTES", default_value = "268435456", value_parser = clap::value_parser!(u64).range(0..=1_099_511_627_776))]
    pub max_hash_bytes: u64,

    /// Seconds one tool call may take.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub call_timeout: Duration,

    /// Most tool calls running at once; more wait their turn (first come, first served)
    /// for up to --queue-wait, then are refused with a result saying so.
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_concurrent_calls: u64,

    /// Seconds a call waits for a free slot (--max-concurrent-calls) before it is refused
    /// as busy; 0 refuses at once.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub queue_wait: Duration,

    /// Deepest nesting of a call's arguments (the arguments object is level 1).
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_argument_depth: u64,

    /// Most entries (object members and array elements, at every level) in a call's
    /// arguments.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_argument_items: u64,

    /// Tools per `tools/list` page. The default lists every tool on the first page, since
    /// several hosts never ask for a second one; a lower value pages with a cursor.
    #[arg(long, value_name = "N", default_value = "100", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub page_size: u64,

    /// Largest single message read from stdin, in bytes.
    #[arg(long, value_name = "BYTES", default_value = "1048576", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    pub max_message_size: u64,

    /// A PostgreSQL connection string for `read_only_sql` (registered only with one); prefer
    /// the variable, since a flag shows in `ps`. Give it a least-privilege role.
    #[arg(long, env = "MCP_SQL_DSN", hide_env_values = true, value_name = "DSN")]
    pub sql_dsn: Option<String>,

    /// Most rows one read_only_sql query returns (its outer LIMIT is at most this).
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub sql_max_rows: u64,

    /// Most bytes of rows (as JSON) one read_only_sql answer carries; the rest is cut.
    #[arg(long, value_name = "BYTES", default_value = "1048576", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    pub sql_max_bytes: u64,

    /// Seconds one read_only_sql query may run (its transaction's statement_timeout).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub sql_timeout: Duration,

    /// Connections kept to the read_only_sql database.
    #[arg(long, value_name = "N", default_value = "2", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub sql_connections: u64,

    /// Diagnostics on stderr: off, error, warn, info, debug or trace.
    #[arg(long, value_enum, default_value = "warn", env = "MCP_STDIO_LOG_LEVEL")]
    pub log_level: LogLevel,

    /// Diagnostics format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

pub fn sandbox_config(args: SandboxArgs) -> Result<SandboxConfig, String> {
    let root = match args.root {
        Some(root) => root,
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    if !root.is_dir() {
        return Err(format!("--root '{}' is not a directory", root.display()));
    }
    crate::sandbox::Denylist::new(&args.deny, &args.allow)?;
    Ok(SandboxConfig {
        root,
        deny: args.deny,
        allow: args.allow,
        limits: Limits {
            max_read_bytes: args.max_read_bytes,
            max_matches: args.max_matches as usize,
            max_files: args.max_files as usize,
            max_entries: args.max_entries as usize,
            max_hash_bytes: args.max_hash_bytes,
        },
        call_timeout: args.call_timeout,
        max_concurrent_calls: args.max_concurrent_calls as usize,
        queue_wait: args.queue_wait,
        shape: crate::sandbox::Shape {
            max_depth: args.max_argument_depth as usize,
            max_items: args.max_argument_items as usize,
        },
        page_size: args.page_size as usize,
        max_message_size: args.max_message_size as usize,
        sql: args
            .sql_dsn
            .filter(|dsn| !dsn.trim().is_empty())
            .map(|dsn| crate::sandbox::SqlConfig {
                database: crate::sandbox::sql::database::DatabaseConfig {
                    dsn: crate::secret::Secret::new(dsn),
                    connections: args.sql_connections as usize,
                },
                max_rows: args.sql_max_rows,
                max_bytes: args.sql_max_bytes as usize,
                timeout: args.sql_timeout,
            }),
    })
}
