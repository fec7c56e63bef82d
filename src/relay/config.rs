//! What the relay is told, already validated by `cli`: the upstream, its bounds and the two
//! choices (`--protocol-era`, `--transport`). Nothing in `relay/` sees a flag.

use std::time::Duration;

use http::header::HeaderMap;
use url::Url;

use crate::http::client::ClientOptions;

/// Everything the relay needs, already validated. Built by `cli`; the relay never sees flags.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub url: Url,
    /// `-H` headers and the bearer token (marked sensitive), sent on every request.
    pub headers: HeaderMap,
    pub client: ClientOptions,
    /// Idle limit of the long-lived GET stream; `None` disables it.
    pub sse_read_timeout: Option<Duration>,
    pub max_message_size: usize,
    pub max_in_flight: usize,
    pub cancel_filter: bool,
    pub cancel_ttl: Duration,
    pub max_retries: u32,
    pub retry_after_cap: Duration,
    /// Consecutive failed attempts to resume or reopen a stream before giving up.
    pub max_reconnects: u32,
    pub shutdown_grace: Duration,
    /// OAuth for this server: `None` when a static Authorization is configured.
    pub oauth: Option<crate::oauth::OAuthConfig>,
    /// `--protocol-era`.
    pub protocol_era: EraChoice,
    /// `--transport`.
    pub transport: TransportChoice,
    /// Input rounds a modern server may ask of a legacy host in one call.
    pub max_input_rounds: u32,
    /// How long the host may take to answer one of those questions.
    pub input_timeout: Duration,
    /// `--max-tasks`: 2025-11-25 tasks a legacy host may hold on a 2026-07-28 server.
    pub max_tasks: usize,
    /// `--task-ttl`: the longest the relay keeps such a task.
    pub task_ttl: Duration,
    /// `--audit-log` and what goes with it.
    pub audit: Option<crate::audit::Settings>,
    /// `--otel-endpoint` and the `OTEL_*` variables: where spans and metrics go, if anywhere.
    pub telemetry: Option<crate::telemetry::Settings>,
}

/// `--protocol-era`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraChoice {
    /// Probe the upstream once and adapt.
    Auto,
    /// Speak the handshake era upstream; no probe.
    Legacy,
    /// Speak 2026-07-28 upstream whatever a probe says.
    Modern,
}

/// `--transport`: what the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    StreamableHttp,
    Sse,
    Auto,
}
