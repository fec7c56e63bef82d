//! The aggregate endpoint's sessions: one client session (or a principal's pooled session)
//! in front of several served servers. `AggregateBackend` is a `Backend` like a stdio
//! child's, so the handshake-era endpoint, the 2026-07-28 endpoint and the front door drive
//! it unchanged; behind it each member server gets a session of its own, opened on first
//! use through `Members`. The rules (names, URIs, cursors, routes) are `aggregate/`'s; this
//! module does the I/O.
//!
//! `endpoint.rs` is what every session of one aggregate endpoint shares (each server's
//! state, and per kind of client, `profile.rs`, the catalog of lists read through the
//! gateway's own "scout" session per server); `scout.rs` reads a server's handshake and
//! lists; `members.rs` a
//! client session's own member sessions; `relay.rs` carries a routed request and what comes
//! back; `backend.rs` the `Backend` itself.

mod backend;
mod endpoint;
mod members;
mod profile;
mod relay;
mod scout;

use std::sync::Arc;
use std::time::Duration;

pub use backend::AggregateBackend;
pub use endpoint::{Endpoint, ServerState};

use super::session::Session;
use crate::serve::aggregate::names::Aliases;

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
