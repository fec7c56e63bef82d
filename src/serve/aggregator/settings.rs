//! What an aggregate endpoint is told: the command line's flags (`AggregateFlags`), one
//! endpoint's spec from the config (`AggregateSpec`), and how it reaches its servers
//! (`Members`).

use std::sync::Arc;
use std::time::Duration;

use crate::serve::aggregate::names::Aliases;
use crate::serve::session::Session;

/// The command line's aggregate settings (`--aggregate` and its companions).
#[derive(Debug, Clone)]
pub struct AggregateFlags {
    /// `--aggregate`: every server of the file also at `--path`.
    pub at_path: bool,
    /// `--aggregate-separator`.
    pub separator: String,
    /// `--aggregate-fail closed`.
    pub fail_closed: bool,
    /// `--aggregate-timeout`: one server's start, handshake or list read.
    pub timeout: Duration,
    /// `--aggregate-concurrency`: servers asked at once in a fan-out.
    pub concurrency: usize,
    /// `--aggregate-max-list-items`.
    pub max_list_items: usize,
    /// `--aggregate-page-size`.
    pub page_size: usize,
    /// `--aggregate-retry-after`: how long a server that failed is left out before it is
    /// tried again (and how long a session must live to be restarted when it ends).
    pub retry_after: Duration,
}

impl Default for AggregateFlags {
    fn default() -> Self {
        AggregateFlags {
            at_path: false,
            separator: crate::serve::aggregate::names::DEFAULT_SEPARATOR.to_owned(),
            fail_closed: false,
            timeout: Duration::from_secs(10),
            concurrency: 8,
            max_list_items: 10_000,
            page_size: 1000,
            retry_after: Duration::from_secs(2),
        }
    }
}

/// One aggregate endpoint as the config makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateSpec {
    /// `--aggregate`'s is named "aggregate"; a file's `[aggregates.NAME]` its NAME.
    pub name: String,
    pub path: String,
    /// The servers behind it, in the file's order.
    pub servers: Vec<String>,
    pub separator: String,
    pub fail_closed: bool,
    /// `[servers.NAME.aliases]`: (server, tool or prompt) → the name published instead.
    pub aliases: Aliases,
}

/// How an aggregate endpoint reaches its servers: a session with one of them, as a
/// client of that server's own gateway would get one (its bounds apply).
pub trait Members: Send + Sync {
    /// A new session with `server` for `principal` (`pooled`: shared by a principal's
    /// 2026-07-28 calls, or the endpoint's own). The error says why, for the client.
    fn open(
        &self,
        server: &str,
        principal: Option<String>,
        pooled: bool,
    ) -> Result<Arc<Session>, String>;
}
