//! What one served stdio server is configured with: `ServeConfig`, already validated by
//! `cli` (or by a config file's entry), read by everything below the front door.

use std::net::SocketAddr;
use std::time::Duration;

use super::auth;
use super::child;
use super::child_era;
use super::cluster;
use super::guard::Guards;
use super::spares;
use crate::secret::Secret;

/// Everything serve mode needs, already validated by `cli`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The stdio server: program and arguments (and, from a config file, its environment
    /// and folder).
    pub command: child::ChildCommand,
    pub listen: SocketAddr,
    /// `--path`, starting with `/`; matched ASCII case-insensitively.
    pub path: String,
    /// `--auth-token` / `MCP_STDIO_SERVE_TOKEN`: every MCP request must carry it.
    pub auth_token: Option<Secret>,
    /// `--oauth-issuer` and its companions: tokens from an external authorization server.
    pub resource_server: Option<auth::ResourceServerConfig>,
    /// `--enable-oauth` and its companions: serve is its own authorization server.
    pub auth_server: Option<crate::authserver::AuthServerConfig>,
    /// `--public-url`: this endpoint as clients reach it.
    pub public_url: Option<url::Url>,
    pub guards: Guards,
    pub max_sessions: usize,
    /// `--spare-children` and, under `--config`, `--spare-idle-ttl` and `--spare-budget`:
    /// children kept started for the next sessions (within `--max-sessions`).
    pub spares: spares::SparePolicy,
    /// `--max-sessions-per-principal`: sessions one authenticated principal may hold.
    pub max_sessions_per_principal: usize,
    /// `None`: sessions never expire for idleness.
    pub session_idle_ttl: Option<Duration>,
    /// `--session-max-age`: a session (and, among replicas, its sealed id) ends this long
    /// after it began, however busy.
    pub session_max_age: Duration,
    pub max_message_size: usize,
    pub max_requests_per_session: usize,
    /// Messages waiting for a child's stdin before a client is told it is not reading.
    pub child_queue: usize,
    /// Events kept per session for `Last-Event-ID`.
    pub replay_buffer: usize,
    /// Longest wait for the child's first word on a request (then 504).
    pub response_timeout: Duration,
    pub header_read_timeout: Duration,
    /// `--max-drain-size`: the most of a request body left unread by a refusal that is
    /// read and dropped to keep the connection open (larger ones close it).
    pub max_drain_size: u64,
    /// `--timeout-drain`: how long that rest may take to arrive.
    pub drain_timeout: Duration,
    pub keepalive: Duration,
    /// How long a child gets after its stdin closes, and again after SIGTERM.
    pub child_grace: Duration,
    pub shutdown_grace: Duration,
    /// `--modern-only`: no handshake era (GET and DELETE 405, `initialize` -32022).
    pub modern_only: bool,
    /// `--modern-clients` (or `--modern-only`): 2026-07-28 requests are served; otherwise
    /// they get the stateful-legacy 400, and a dual-era client falls back.
    pub modern_clients: bool,
    /// `--child-era`: probe the server's era, or take it as given.
    pub child_era: child_era::ChildEraChoice,
    /// `--child-probe-timeout`: how long the probe waits for `server/discover`.
    pub child_probe_timeout: Duration,
    /// `--input-timeout`: how long a call waits parked for a client's `input_required` retry.
    pub input_timeout: Duration,
    /// `--max-tasks-per-principal`: tasks one principal may hold (a handshake-era child's,
    /// run for 2026-07-28 clients).
    pub max_tasks_per_principal: usize,
    /// `--task-ttl`: the longest a task is kept.
    pub task_ttl: Duration,
    /// `--max-task-questions`: the questions one such task may wait on at once.
    pub max_task_questions: usize,
    /// `--cluster-key-file` and `--advertise-url`: one of several replicas.
    pub cluster: Option<cluster::ClusterConfig>,
    /// `--reload-grace` (with `--config`): how long sessions of a server that a reload
    /// changed or removed may go on before they are ended.
    pub reload_grace: Duration,
    /// `--aggregate` and its companions (with `--config`).
    pub aggregate: super::aggregator::AggregateFlags,
    /// `--policy` and its bounds, as given.
    pub policy: super::policing::PolicySource,
    /// `--audit-log` and what goes with it (`None`: no audit log).
    pub audit: Option<crate::audit::Settings>,
    /// `--otel-endpoint` and the `OTEL_*` variables: where spans and metrics go, if anywhere.
    pub telemetry: Option<crate::telemetry::Settings>,
    /// The listener's audit log, once started.
    pub auditor: Option<std::sync::Arc<crate::audit::Auditor>>,
    /// The listener's policy, once loaded (`None`: no policy, nothing checked).
    pub policing: Option<std::sync::Arc<super::policing::Policing>>,
}

impl ServeConfig {
    /// The span a config file's server logs in (none for the single server of a command
    /// line).
    pub fn span(&self) -> tracing::Span {
        match &self.command.server {
            Some(name) => tracing::info_span!("server", name = %name),
            None => tracing::Span::none(),
        }
    }
}
