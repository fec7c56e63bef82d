//! Sandbox mode: the built-in, read-only workspace tool server, an MCP server on stdio (and
//! what `serve` publishes when given no command). The boundary is the product: every path
//! is opened beneath the root (`workspace`), credentials are denied by resolved path
//! (`denylist`), results are redacted once when complete (`crate::redact`) and workspace content is
//! fenced as untrusted (`untrusted`). `server` speaks the protocol; `tools` knows nothing of it.

mod denylist;
mod guard;
mod problem;
mod render;
mod schema;
mod server;
pub mod sql;
mod tools;
mod untrusted;
pub mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::jsonrpc::error::{INVALID_REQUEST, error_response};
use crate::jsonrpc::framing::{Frame, LineReader, trimmed};
use crate::jsonrpc::stdio::StdioModes;
use crate::jsonrpc::writer;

pub use denylist::Denylist;
pub use guard::Shape;
pub use tools::Limits;

/// Everything sandbox mode needs, already validated by `cli`.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub root: PathBuf,
    pub deny: Vec<String>,
    pub allow: Vec<String>,
    pub limits: Limits,
    pub call_timeout: Duration,
    pub max_concurrent_calls: usize,
    /// How long a call waits, in FIFO order, for one of those slots (`--queue-wait`).
    pub queue_wait: Duration,
    /// The structural guard's bounds (`--max-argument-depth`, `--max-argument-items`).
    pub shape: guard::Shape,
    /// Tools per `tools/list` page (`--page-size`): by default more than the server has,
    /// because several hosts read only the first page.
    pub page_size: usize,
    pub max_message_size: usize,
    /// `--sql-dsn` / `MCP_SQL_DSN` and its bounds: `read_only_sql` is registered.
    pub sql: Option<SqlConfig>,
}

/// `read_only_sql`'s settings, already validated by `cli`.
#[derive(Debug, Clone)]
pub struct SqlConfig {
    pub database: sql::database::DatabaseConfig,
    pub max_rows: u64,
    pub max_bytes: usize,
    pub timeout: Duration,
}

/// Serves stdin/stdout until stdin ends; returns the exit code.
pub async fn run(config: SandboxConfig) -> i32 {
    let deny = match Denylist::new(&config.deny, &config.allow) {
        Ok(deny) => deny,
        Err(e) => {
            tracing::error!("{e}");
            return 2;
        }
    };
    let workspace = match workspace::Workspace::open(&config.root, deny) {
        Ok(workspace) => workspace,
        Err(e) => {
            tracing::error!("cannot open the workspace root: {e}");
            return 1;
        }
    };
    tracing::info!(root = %workspace.name, "sandbox serving the workspace read-only on stdio");
    let max = config.max_message_size;
    let server = match server::Server::new(config, workspace) {
        Ok(server) => Arc::new(server),
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let mut stdio = StdioModes::default();
    let (outbox, mut ended) = writer::spawn(stdio.output(), 1024);
    let mut reader = LineReader::new(stdio.input(), max);
    let mut signals = std::pin::pin!(crate::shutdown::signal());
    let mut output_open = true;
    loop {
        tokio::select! {
            _ = &mut signals => break,
            _ = &mut ended => {
                output_open = false;
                break;
            }
            frame = reader.next() => match frame {
                Ok(Some(Frame::Line(line))) => {
                    if let Some(content) = trimmed(&line) {
                        server.handle(content, &outbox).await;
                    }
                }
                Ok(Some(Frame::TooLong)) => {
                    let message = format!("message exceeds --max-message-size ({max} bytes)");
                    outbox.send(error_response("null", INVALID_REQUEST, &message, None)).await;
                }
                Ok(None) | Err(_) => break,
            },
        }
    }
    // Calls already read are answered before the end (each is bounded by --queue-wait and
    // --call-timeout), so a client that closes stdin right after its last request still
    // gets every answer.
    server.tasks.close();
    let bound = server.config.queue_wait + server.config.call_timeout + Duration::from_secs(1);
    if output_open
        && tokio::time::timeout(bound, server.tasks.wait())
            .await
            .is_err()
    {
        tracing::warn!("calls still running at the end of input; their answers are lost");
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), outbox.flush()).await;
    0
}
