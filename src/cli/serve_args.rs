//! `mcp-stdio serve`'s flags as clap reads them: `ServeArgs`. `serve.rs` checks them and
//! makes the `ServeConfig`.

use std::net::IpAddr;
use std::time::Duration;

use clap::Args;

use super::{non_negative_seconds, positive_seconds};
use crate::logging::{LogFormat, LogLevel};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub(super) host: IpAddr,

    /// Port to listen on (0: a free one; the startup line on stderr shows it).
    #[arg(long, default_value = "8080")]
    pub(super) port: u16,

    /// The MCP endpoint's path (matched ASCII case-insensitively).
    #[arg(long, default_value = "/mcp")]
    pub(super) path: String,

    /// Require `Authorization: Bearer TOKEN` (prefer the variable: flags show in `ps`).
    #[arg(
        long,
        env = "MCP_STDIO_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub(super) auth_token: Option<String>,

    /// An Origin allowed besides loopback ones (when bound to loopback). Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    pub(super) allow_origin: Vec<String>,

    /// A Host name this server answers to besides its bind address. Repeatable.
    #[arg(long, value_name = "NAME")]
    pub(super) allow_host: Vec<String>,

    /// Peers (CIDR) whose X-Forwarded-Host and X-Forwarded-Proto are believed. Repeatable.
    #[arg(long, value_name = "CIDR")]
    pub(super) trusted_proxy: Vec<String>,

    /// Most sessions (each is a child process) at once.
    #[arg(long, value_name = "N", default_value = "100", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(super) max_sessions: u64,

    /// Children kept started and waiting, so a new session (or a new user's backend) does
    /// not wait for a process to start; they count against --max-sessions (0: none).
    #[arg(long, value_name = "N", default_value = "2", value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub(super) spare_children: u64,

    /// Most sessions one authenticated principal may hold at once (its pooled child
    /// included), so one user cannot take every --max-sessions slot.
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(super) max_sessions_per_principal: u64,

    /// Seconds a session may stay idle before it and its child end (0: never).
    #[arg(long, value_name = "SECONDS", default_value = "1800", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) session_idle_ttl: Duration,

    /// Seconds a session lives at most, however busy: then it and its child end and its id
    /// is answered 404 like an unknown one (the client starts a new session). Among
    /// replicas the sealed id carries its time, so no replica routes an older one.
    #[arg(long, value_name = "SECONDS", default_value = "86400", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) session_max_age: Duration,

    /// Largest single message in either direction, in bytes.
    #[arg(long, value_name = "BYTES", default_value = "10485760", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    pub(super) max_message_size: u64,

    /// Most requests in flight on one session.
    #[arg(long, value_name = "N", default_value = "64", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(super) max_requests_per_session: u64,

    /// Messages queued for one child's stdin; when it stays full for --timeout-response
    /// (the child stopped reading), the client gets 503.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(super) child_queue: u64,

    /// Events kept per session so a GET stream can resume with Last-Event-ID.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(super) replay_buffer: u64,

    /// Seconds the server may take to say anything about a request (then 504).
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) timeout_response: Duration,

    /// Seconds a client may take to send its request headers (slowloris protection).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) timeout_headers: Duration,

    /// Most bytes of a request body a refusal (a 401, say) left unread that are read and
    /// dropped, so the client may reuse its connection; a larger body, or one slower than
    /// --timeout-drain, gets `Connection: close` instead (0: always close).
    #[arg(long, value_name = "BYTES", default_value = "65536", value_parser = clap::value_parser!(u64).range(0..=1_073_741_824))]
    pub(super) max_drain_size: u64,

    /// Seconds a refusal waits for the rest of a body it left unread (see --max-drain-size).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) timeout_drain: Duration,

    /// Seconds between `: keepalive` comments on idle SSE streams.
    #[arg(long, value_name = "SECONDS", default_value = "15", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) keepalive: Duration,

    /// Seconds a child gets to exit after its stdin closes, and again after SIGTERM.
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) child_grace: Duration,

    /// Seconds requests in flight may take to finish at shutdown.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) shutdown_grace: Duration,

    /// Serve handshake-era clients only: a 2026-07-28 request gets the stateful-legacy 400,
    /// and a dual-era client falls back to `initialize`.
    #[arg(long, conflicts_with = "modern_only")]
    pub(super) legacy_only: bool,

    /// Accept JWT access tokens from this authorization server (resource-server mode): its
    /// metadata names the JWKS; the token's `sub` is the caller. Not with --auth-token.
    #[arg(long, value_name = "URL")]
    pub(super) oauth_issuer: Option<String>,

    /// The audience a token must name (default: --public-url).
    #[arg(long, value_name = "AUDIENCE")]
    pub(super) oauth_audience: Option<String>,

    /// A scope every token must carry (advertised in the metadata; with --enable-oauth,
    /// also what is granted by default). Repeatable.
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    pub(super) oauth_scopes: Vec<String>,

    /// Clock skew allowed on a token's `exp` and `nbf`, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) oauth_leeway: Duration,

    /// Shortest time between two fetches of the issuer's keys (a token with an unknown key
    /// id refetches them at most this often), in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) oauth_jwks_refetch: Duration,

    /// Accepted tokens remembered (by their SHA-256, until they expire and at most 60 s) so
    /// that a client's next request skips the signature check; 0: check every request.
    #[arg(long, value_name = "N", default_value = "4096", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub(super) oauth_token_cache: u64,

    /// Check opaque (non-JWT) tokens at this RFC 7662 introspection endpoint, with the
    /// client id and secret in MCP_STDIO_INTROSPECTION_CLIENT_ID and _SECRET.
    #[arg(long, value_name = "URL")]
    pub(super) introspection_url: Option<String>,

    /// Accept introspection answers that name no audience (no aud, no resource): only for
    /// an authorization server that never sends one. Without it such a token is refused,
    /// since it may have been issued for another resource.
    #[arg(long)]
    pub(super) introspection_without_audience: bool,

    /// Accept only RFC 9068 access tokens (JOSE header typ at+jwt), for an authorization
    /// server that marks its access tokens so (Auth0's RFC 9068 profile, Duende, Curity,
    /// Ping, node oidc-provider). Without it, id_tokens are told apart by their claims.
    #[arg(
        long,
        requires = "oauth_issuer",
        conflicts_with = "oauth_no_id_token_check"
    )]
    pub(super) oauth_require_at_jwt: bool,

    /// Do not tell id_tokens from access tokens by their claims, only by explicit markers
    /// (Keycloak's typ, Cognito's token_use): for a provider whose access tokens carry
    /// id_token claims (Authentik). Only when --oauth-audience is no OpenID client's id.
    #[arg(long, requires = "oauth_issuer")]
    pub(super) oauth_no_id_token_check: bool,

    /// Most introspection requests in flight at once; more wait their turn.
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(super) introspection_concurrency: u64,

    /// This endpoint's URL as clients reach it, e.g. https://mcp.example.com/mcp (the
    /// resource in its metadata, and the default token audience).
    #[arg(long, value_name = "URL")]
    pub(super) public_url: Option<String>,

    /// Serve 2026-07-28 clients only: GET and DELETE answer 405, initialize -32022.
    #[arg(long)]
    pub(super) modern_only: bool,

    #[command(flatten)]
    pub(super) embedded: super::serve_oauth::EmbeddedArgs,

    #[command(flatten)]
    pub(super) cluster: super::serve_cluster::ClusterArgs,

    #[command(flatten)]
    pub(super) aggregate: super::serve_aggregate::AggregateArgs,

    /// Who may see and use which tools, prompts and resources: a TOML file of CEL rules
    /// (docs/policy.md; check one offline with `mcp-stdio policy check`). With --config,
    /// added to the file's own `[policy]` rules. SIGHUP reloads it (a broken file keeps
    /// the rules in force and says why).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub(super) policy_limits: super::policy::LimitArgs,

    #[command(flatten)]
    pub(super) audit: super::audit_args::AuditArgs,

    #[command(flatten)]
    pub(super) otel: super::otel_args::OtelArgs,

    /// The stdio server's protocol era: `auto` asks a disposable sibling process
    /// `server/discover` once; `legacy` always runs `initialize`; `modern` passes 2026-07-28
    /// requests through with their envelope.
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) child_era: ChildEraArg,

    /// Seconds the era probe waits for the server's answer (then: handshake era).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) child_probe_timeout: Duration,

    /// Seconds a handshake-era server's call stays parked waiting for a 2026-07-28 client to
    /// retry with its `input_required` answers (then it is cancelled).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) input_timeout: Duration,

    /// Most tasks one principal may hold at once when a 2026-07-28 client's calls run as a
    /// handshake-era server's tasks; a call past it gets an error naming this flag.
    #[arg(long, value_name = "N", default_value = "64", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(super) max_tasks_per_principal: u64,

    /// Seconds a task is kept for a 2026-07-28 client when a handshake-era server runs it
    /// (the `ttl` asked of the server; a shorter one it grants wins): then it is dropped.
    #[arg(long, value_name = "SECONDS", default_value = "3600", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub(super) task_ttl: Duration,

    /// Questions one such task may wait on at once (its elicitations, sampling and roots
    /// requests, shown as `inputRequests`); more are refused to the server.
    #[arg(long, value_name = "N", default_value = "32", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(super) max_task_questions: u64,

    /// Diagnostics on stderr: off, error, warn, info, debug or trace.
    #[arg(long, value_enum, default_value = "info", env = "MCP_STDIO_LOG_LEVEL")]
    pub(super) log_level: LogLevel,

    /// Diagnostics format.
    #[arg(long, value_enum, default_value = "text")]
    pub(super) log_format: LogFormat,

    /// Serve several stdio servers from this file, each at /NAME/mcp: TOML
    /// (`[servers.NAME]`) or the `mcpServers` JSON of Claude Desktop, Claude Code and
    /// Cursor (`.mcp.json`). SIGHUP reloads it. Not with a command after `--`.
    #[arg(long, value_name = "FILE")]
    pub(super) config: Option<std::path::PathBuf>,

    /// With --config: the most idle spare children of all the file's servers together
    /// (default 2). A server gets spares (up to --spare-children) once it has been used,
    /// or from the start when its entry sets `spare_children`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub(super) spare_budget: Option<u64>,

    /// With --config: seconds without a new session after which a used server's spares
    /// end, until it is used again (default 600; 0: never). An entry's `spare_idle_ttl`
    /// overrides it.
    #[arg(long, value_name = "SECONDS", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) spare_idle_ttl: Option<Duration>,

    /// With --config: seconds a used server must have gone without a session before it
    /// gives its spares back to a server that found --spare-budget spent (default 10).
    #[arg(long, value_name = "SECONDS", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) spare_yield_after: Option<Duration>,

    /// Seconds the sessions of a server that a reload changed or removed may go on
    /// before they are ended (new sessions go to the new config at once).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub(super) reload_grace: Duration,

    /// The stdio MCP server to publish, and its arguments (after `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub(super) command: Vec<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum ChildEraArg {
    Auto,
    Legacy,
    Modern,
}
