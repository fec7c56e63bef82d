//! What a request's task is given: the link to the upstream, the gate to the host, what is
//! known of both sides' eras, the modern server's tool table and the relay's own questions
//! to the host. Narrower than the relay: no path's state, no stdin loop, no task tracker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_util::sync::CancellationToken;

use super::config::RelayConfig;
use super::eras::Eras;
use super::gate::Gate;
use super::input::HostRequests;
use super::link::Link;
use super::tool_table::ToolHeaderTable;

pub struct Ctx {
    pub config: RelayConfig,
    pub link: Arc<Link>,
    pub gate: Arc<Gate>,
    /// Which era each side speaks.
    pub eras: Eras,
    /// A modern server's tools, for their `Mcp-Param-*` headers.
    pub tools: ToolHeaderTable,
    /// Requests the relay put to the host, waiting for its answers.
    pub host_requests: HostRequests,
    /// Fired when shutdown begins, so long-lived subscriptions can end gracefully.
    pub closing: CancellationToken,
    next_id: AtomicU64,
}

impl Ctx {
    pub fn new(config: RelayConfig, link: Arc<Link>, gate: Arc<Gate>) -> Arc<Self> {
        let eras = Eras::new(config.protocol_era);
        Arc::new(Ctx {
            config,
            link,
            gate,
            eras,
            tools: Default::default(),
            host_requests: Default::default(),
            closing: CancellationToken::new(),
            next_id: AtomicU64::new(0),
        })
    }

    /// A fresh id for a request of the relay's own making: unique for the process, and in
    /// a namespace no host uses (`mcp-stdio-…`).
    pub fn next_upstream_id(&self, kind: &str) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        // Concatenated, not `format!`ted: one id per call, and the formatting machinery
        // cost more than the id (callgrind).
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n);
        let mut id = String::with_capacity(11 + kind.len() + digits.len());
        id.push_str("mcp-stdio-");
        id.push_str(kind);
        id.push('-');
        id.push_str(digits);
        id
    }

    /// (Re)starts the session's GET stream (see [`Link::restart_server_stream`]).
    pub fn restart_server_stream(&self) {
        self.link.restart_server_stream();
    }
}
