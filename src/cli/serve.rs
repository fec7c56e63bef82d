//! `mcp-stdio serve`: its flags and their validation into a `ServeConfig`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;

use super::{non_negative_seconds, positive_seconds};
use crate::logging::{LogFormat, LogLevel};
use crate::secret::Secret;
use crate::serve::ServeConfig;
use crate::serve::auth::ResourceServerConfig;
use crate::serve::child_era::ChildEraChoice;
use crate::serve::guard::Guards;
use crate::serve::spares::{SpareBudget, SparePolicy};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,

    /// Port to listen on (0: a free one; the startup line on stderr shows it).
    #[arg(long, default_value = "8080")]
    port: u16,

    /// The MCP endpoint's path (matched ASCII case-insensitively).
    #[arg(long, default_value = "/mcp")]
    path: String,

    /// Require `Authorization: Bearer TOKEN` (prefer the variable: flags show in `ps`).
    #[arg(
        long,
        env = "MCP_STDIO_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    auth_token: Option<String>,

    /// An Origin allowed besides loopback ones (when bound to loopback). Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,

    /// A Host name this server answers to besides its bind address. Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,

    /// Peers (CIDR) whose X-Forwarded-Host and X-Forwarded-Proto are believed. Repeatable.
    #[arg(long, value_name = "CIDR")]
    trusted_proxy: Vec<String>,

    /// Most sessions (each is a child process) at once.
    #[arg(long, value_name = "N", default_value = "100", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_sessions: u64,

    /// Children kept started and waiting, so a new session (or a new user's backend) does
    /// not wait for a process to start; they count against --max-sessions (0: none).
    #[arg(long, value_name = "N", default_value = "2", value_parser = clap::value_parser!(u64).range(0..=1000))]
    spare_children: u64,

    /// Most sessions one authenticated principal may hold at once (its pooled child
    /// included), so one user cannot take every --max-sessions slot.
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_sessions_per_principal: u64,

    /// Seconds a session may stay idle before it and its child end (0: never).
    #[arg(long, value_name = "SECONDS", default_value = "1800", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    session_idle_ttl: Duration,

    /// Seconds a session lives at most, however busy: then it and its child end and its id
    /// is answered 404 like an unknown one (the client starts a new session). Among
    /// replicas the sealed id carries its time, so no replica routes an older one.
    #[arg(long, value_name = "SECONDS", default_value = "86400", value_parser = positive_seconds, allow_hyphen_values = true)]
    session_max_age: Duration,

    /// Largest single message in either direction, in bytes.
    #[arg(long, value_name = "BYTES", default_value = "10485760", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    max_message_size: u64,

    /// Most requests in flight on one session.
    #[arg(long, value_name = "N", default_value = "64", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_requests_per_session: u64,

    /// Messages queued for one child's stdin; when it stays full for --timeout-response
    /// (the child stopped reading), the client gets 503.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    child_queue: u64,

    /// Events kept per session so a GET stream can resume with Last-Event-ID.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    replay_buffer: u64,

    /// Seconds the server may take to say anything about a request (then 504).
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_response: Duration,

    /// Seconds a client may take to send its request headers (slowloris protection).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_headers: Duration,

    /// Most bytes of a request body a refusal (a 401, say) left unread that are read and
    /// dropped, so the client may reuse its connection; a larger body, or one slower than
    /// --timeout-drain, gets `Connection: close` instead (0: always close).
    #[arg(long, value_name = "BYTES", default_value = "65536", value_parser = clap::value_parser!(u64).range(0..=1_073_741_824))]
    max_drain_size: u64,

    /// Seconds a refusal waits for the rest of a body it left unread (see --max-drain-size).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_drain: Duration,

    /// Seconds between `: keepalive` comments on idle SSE streams.
    #[arg(long, value_name = "SECONDS", default_value = "15", value_parser = positive_seconds, allow_hyphen_values = true)]
    keepalive: Duration,

    /// Seconds a child gets to exit after its stdin closes, and again after SIGTERM.
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    child_grace: Duration,

    /// Seconds requests in flight may take to finish at shutdown.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    shutdown_grace: Duration,

    /// Serve handshake-era clients only: a 2026-07-28 request gets the stateful-legacy 400,
    /// and a dual-era client falls back to `initialize`.
    #[arg(long, conflicts_with = "modern_only")]
    legacy_only: bool,

    /// Accept JWT access tokens from this authorization server (resource-server mode): its
    /// metadata names the JWKS; the token's `sub` is the caller. Not with --auth-token.
    #[arg(long, value_name = "URL")]
    oauth_issuer: Option<String>,

    /// The audience a token must name (default: --public-url).
    #[arg(long, value_name = "AUDIENCE")]
    oauth_audience: Option<String>,

    /// A scope every token must carry (advertised in the metadata; with --enable-oauth,
    /// also what is granted by default). Repeatable.
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    oauth_scopes: Vec<String>,

    /// Clock skew allowed on a token's `exp` and `nbf`, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    oauth_leeway: Duration,

    /// Shortest time between two fetches of the issuer's keys (a token with an unknown key
    /// id refetches them at most this often), in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = positive_seconds, allow_hyphen_values = true)]
    oauth_jwks_refetch: Duration,

    /// Accepted tokens remembered (by their SHA-256, until they expire and at most 60 s) so
    /// that a client's next request skips the signature check; 0: check every request.
    #[arg(long, value_name = "N", default_value = "4096", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    oauth_token_cache: u64,

    /// Check opaque (non-JWT) tokens at this RFC 7662 introspection endpoint, with the
    /// client id and secret in MCP_STDIO_INTROSPECTION_CLIENT_ID and _SECRET.
    #[arg(long, value_name = "URL")]
    introspection_url: Option<String>,

    /// Accept introspection answers that name no audience (no aud, no resource): only for
    /// an authorization server that never sends one. Without it such a token is refused,
    /// since it may have been issued for another resource.
    #[arg(long)]
    introspection_without_audience: bool,

    /// Accept only RFC 9068 access tokens (JOSE header typ at+jwt), for an authorization
    /// server that marks its access tokens so (Auth0's RFC 9068 profile, Duende, Curity,
    /// Ping, node oidc-provider). Without it, id_tokens are told apart by their claims.
    #[arg(
        long,
        requires = "oauth_issuer",
        conflicts_with = "oauth_no_id_token_check"
    )]
    oauth_require_at_jwt: bool,

    /// Do not tell id_tokens from access tokens by their claims, only by explicit markers
    /// (Keycloak's typ, Cognito's token_use): for a provider whose access tokens carry
    /// id_token claims (Authentik). Only when --oauth-audience is no OpenID client's id.
    #[arg(long, requires = "oauth_issuer")]
    oauth_no_id_token_check: bool,

    /// Most introspection requests in flight at once; more wait their turn.
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    introspection_concurrency: u64,

    /// This endpoint's URL as clients reach it, e.g. https://mcp.example.com/mcp (the
    /// resource in its metadata, and the default token audience).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,

    /// Serve 2026-07-28 clients only: GET and DELETE answer 405, initialize -32022.
    #[arg(long)]
    modern_only: bool,

    #[command(flatten)]
    embedded: super::serve_oauth::EmbeddedArgs,

    #[command(flatten)]
    cluster: super::serve_cluster::ClusterArgs,

    /// The stdio server's protocol era: `auto` asks a disposable sibling process
    /// `server/discover` once; `legacy` always runs `initialize`; `modern` passes 2026-07-28
    /// requests through with their envelope.
    #[arg(long, value_enum, default_value = "auto")]
    child_era: ChildEraArg,

    /// Seconds the era probe waits for the server's answer (then: handshake era).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    child_probe_timeout: Duration,

    /// Seconds a handshake-era server's call stays parked waiting for a 2026-07-28 client to
    /// retry with its `input_required` answers (then it is cancelled).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = positive_seconds, allow_hyphen_values = true)]
    input_timeout: Duration,

    /// Diagnostics on stderr: off, error, warn, info, debug or trace.
    #[arg(long, value_enum, default_value = "info", env = "MCP_STDIO_LOG_LEVEL")]
    pub log_level: LogLevel,

    /// Diagnostics format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Serve several stdio servers from this file, each at /NAME/mcp: TOML
    /// (`[servers.NAME]`) or the `mcpServers` JSON of Claude Desktop, Claude Code and
    /// Cursor (`.mcp.json`). SIGHUP reloads it. Not with a command after `--`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,

    /// With --config: the most idle spare children of all the file's servers together
    /// (default 2). A server gets spares (up to --spare-children) once it has been used,
    /// or from the start when its entry sets `spare_children`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1000))]
    spare_budget: Option<u64>,

    /// With --config: seconds without a new session after which a used server's spares
    /// end, until it is used again (default 600; 0: never). An entry's `spare_idle_ttl`
    /// overrides it.
    #[arg(long, value_name = "SECONDS", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    spare_idle_ttl: Option<Duration>,

    /// With --config: seconds a used server must have gone without a session before it
    /// gives its spares back to a server that found --spare-budget spent (default 10).
    #[arg(long, value_name = "SECONDS", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    spare_yield_after: Option<Duration>,

    /// Seconds the sessions of a server that a reload changed or removed may go on
    /// before they are ended (new sessions go to the new config at once).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    reload_grace: Duration,

    /// The stdio MCP server to publish, and its arguments (after `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

/// Checks the flags; `token_from_flag` says whether the token came from the command line
/// (which `ps` shows) rather than the environment.
pub fn serve_config(args: ServeArgs, token_from_flag: bool) -> Result<ServeConfig, String> {
    let mut args = args;
    if let Some(file) = &args.config {
        config_file_rules(&args, file)?;
    }
    if args.command.is_empty() && args.config.is_none() {
        // No command: publish the built-in sandbox over the current directory.
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to run its sandbox: {e}"))?;
        let root = std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?;
        args.command = vec![
            exe.to_string_lossy().into_owned(),
            "sandbox".into(),
            "--root".into(),
            root.to_string_lossy().into_owned(),
        ];
    }
    let command = crate::serve::child::ChildCommand::new(std::mem::take(&mut args.command));
    // With --config the servers come from the file (each checked there).
    if args.config.is_none() && crate::serve::child::find_program(&command).is_none() {
        return Err(format!(
            "cannot find the command '{}': give a path to an executable, or a program on PATH",
            command.program()
        ));
    }
    if !args.path.starts_with('/') || args.path.contains(['?', '#']) {
        return Err(format!(
            "--path '{}' must be a path starting with '/', e.g. /mcp",
            args.path
        ));
    }
    let auth_token = match args.auth_token.take() {
        Some(token) if token.trim().is_empty() => None,
        Some(token) if !crate::era::headers::is_visible_ascii(token.as_bytes()) => {
            return Err(
                "--auth-token / MCP_STDIO_SERVE_TOKEN must be visible ASCII without spaces".into(),
            );
        }
        Some(token) => {
            if token_from_flag {
                tracing::warn!(
                    "--auth-token on the command line is visible to every user in `ps`; prefer MCP_STDIO_SERVE_TOKEN"
                );
            }
            Some(Secret::new(token))
        }
        None => None,
    };
    let public_url = args
        .public_url
        .as_deref()
        .map(|raw| {
            url::Url::parse(raw)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some() && u.fragment().is_none())
                .ok_or_else(|| format!("--public-url '{raw}' must be an http(s) URL, e.g. https://mcp.example.com/mcp"))
        })
        .transpose()?;
    check_scopes(&args.oauth_scopes)?;
    let auth_server = super::serve_oauth::auth_server(
        &args.embedded,
        !args.trusted_proxy.is_empty(),
        &args.oauth_scopes,
        args.oauth_token_cache as usize,
        args.port,
        args.host,
        public_url.as_ref(),
    )?;
    let resource_server = resource_server(&args, public_url.as_ref(), auth_server.is_some())?;
    let cluster = super::serve_cluster::cluster_config(&args.cluster)?;
    let mut auth_server = auth_server;
    if let (Some(cluster), Some(server)) = (&cluster, &mut auth_server) {
        if matches!(server.store, crate::authserver::store::Location::Sqlite(_)) {
            return Err("--enable-oauth among replicas needs a store they share: --oauth-store postgres://USER@HOST/DB (a SQLite file belongs to one replica)".into());
        }
        server.cluster_key = Some(cluster.key.clone());
    }
    let modes = [
        (auth_token.is_some(), "--auth-token (one shared secret)"),
        (
            resource_server.is_some(),
            "--oauth-issuer (tokens from your identity provider)",
        ),
        (
            auth_server.is_some(),
            "--enable-oauth (serve issues tokens itself)",
        ),
    ];
    let chosen: Vec<&str> = modes
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    if chosen.len() > 1 {
        return Err(format!(
            "choose one way to check callers, not several: {}",
            chosen.join(", ")
        ));
    }
    let trusted_proxies = args
        .trusted_proxy
        .iter()
        .map(|cidr| {
            cidr.parse::<ipnet::IpNet>()
                .or_else(|_| cidr.parse::<IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    format!("--trusted-proxy '{cidr}' is not a CIDR or an address, e.g. 10.0.0.0/8")
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for origin in &args.allow_origin {
        let valid = url::Url::parse(origin).ok().filter(|u| {
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some() && u.path() == "/"
        });
        if valid.is_none() || origin.ends_with('/') {
            return Err(format!(
                "--allow-origin '{origin}' must be an origin: scheme://host[:port], e.g. https://claude.ai"
            ));
        }
    }
    let ttl = (!args.session_idle_ttl.is_zero()).then_some(args.session_idle_ttl);
    let spares = spare_policy(&args)?;
    Ok(ServeConfig {
        command,
        listen: SocketAddr::new(args.host, args.port),
        path: args.path,
        auth_token,
        resource_server,
        auth_server,
        public_url,
        guards: Guards {
            loopback: args.host.is_loopback(),
            bind_ip: args.host,
            port: args.port,
            allowed_origins: args.allow_origin,
            allowed_hosts: args.allow_host,
            trusted_proxies,
        },
        max_sessions: args.max_sessions as usize,
        spares,
        max_sessions_per_principal: args.max_sessions_per_principal as usize,
        session_idle_ttl: ttl,
        session_max_age: args.session_max_age,
        max_message_size: args.max_message_size as usize,
        max_requests_per_session: args.max_requests_per_session as usize,
        child_queue: args.child_queue as usize,
        replay_buffer: args.replay_buffer as usize,
        response_timeout: args.timeout_response,
        header_read_timeout: args.timeout_headers,
        max_drain_size: args.max_drain_size,
        drain_timeout: args.timeout_drain,
        keepalive: args.keepalive,
        child_grace: args.child_grace,
        shutdown_grace: args.shutdown_grace,
        modern_only: args.modern_only,
        modern_clients: !args.legacy_only,
        child_era: match args.child_era {
            ChildEraArg::Auto => ChildEraChoice::Auto,
            ChildEraArg::Legacy => ChildEraChoice::Legacy,
            ChildEraArg::Modern => ChildEraChoice::Modern,
        },
        child_probe_timeout: args.child_probe_timeout,
        input_timeout: args.input_timeout,
        cluster,
        reload_grace: args.reload_grace,
    })
}

/// Spares: plain `serve` keeps `--spare-children` from the start; under `--config` they
/// follow each server's use within the listener's `--spare-budget`.
fn spare_policy(args: &ServeArgs) -> Result<SparePolicy, String> {
    let most = args.spare_children as usize;
    if args.config.is_none() {
        if args.spare_budget.is_some()
            || args.spare_idle_ttl.is_some()
            || args.spare_yield_after.is_some()
        {
            return Err("--spare-budget, --spare-idle-ttl and --spare-yield-after go with --config (a file of several servers); one server keeps --spare-children spares from the start".into());
        }
        return Ok(SparePolicy::always(most));
    }
    let budget = args.spare_budget.unwrap_or(DEFAULT_SPARE_BUDGET) as usize;
    let ttl = args.spare_idle_ttl.unwrap_or(DEFAULT_SPARE_IDLE_TTL);
    Ok(SparePolicy {
        most,
        from_start: false,
        idle_ttl: (!ttl.is_zero()).then_some(ttl),
        budget: Some(std::sync::Arc::new(SpareBudget::new(budget))),
        yield_after: args.spare_yield_after.unwrap_or(DEFAULT_SPARE_YIELD_AFTER),
    })
}

/// `--spare-budget`'s default: a file of any size holds at most two idle spares.
const DEFAULT_SPARE_BUDGET: u64 = 2;
/// `--spare-yield-after`'s default.
const DEFAULT_SPARE_YIELD_AFTER: Duration = Duration::from_secs(10);
/// `--spare-idle-ttl`'s default.
const DEFAULT_SPARE_IDLE_TTL: Duration = Duration::from_secs(600);

/// With `--config`: the flags that cannot go with it, and the file checked now (a bad
/// file at startup is a usage error; at a reload it keeps the old config).
fn config_file_rules(args: &ServeArgs, file: &std::path::Path) -> Result<(), String> {
    if !args.command.is_empty() {
        return Err(format!(
            "--config {} and a command after `--` cannot be used together: put the command in the file as a server, or leave --config out",
            file.display()
        ));
    }
    let alone = [
        (args.path != "/mcp", "--path (each server is at /NAME/mcp)"),
        (
            args.embedded.enable_oauth,
            "--enable-oauth (give each server `auth = { mode = \"oauth-issuer\", … }` instead)",
        ),
        (
            args.cluster.cluster_key_file.is_some(),
            "--cluster-key-file and --advertise-url",
        ),
    ];
    if let Some((_, flag)) = alone.iter().find(|(on, _)| *on) {
        return Err(format!("--config cannot be used with {flag}"));
    }
    crate::serve::config_file::load(file, &|name| std::env::var(name).ok()).map(|_| ())
}

/// `--oauth-issuer` and its companions, checked; `None` without `--oauth-issuer`.
fn resource_server(
    args: &ServeArgs,
    public_url: Option<&url::Url>,
    embedded: bool,
) -> Result<Option<ResourceServerConfig>, String> {
    if args.introspection_without_audience && args.introspection_url.is_none() {
        return Err(
            "--introspection-without-audience changes how --introspection-url answers are checked: add --introspection-url".into(),
        );
    }
    let Some(raw) = args.oauth_issuer.as_deref() else {
        if args.oauth_audience.is_some() || args.introspection_url.is_some() {
            return Err("--oauth-audience and --introspection-url need --oauth-issuer (the authorization server whose tokens to accept)".into());
        }
        if !args.oauth_scopes.is_empty() && !embedded {
            return Err("--oauth-scope needs --oauth-issuer (an external authorization server) or --enable-oauth (serve's own)".into());
        }
        return Ok(None);
    };
    let issuer = crate::oauth::wellknown::checked(raw, "--oauth-issuer").map_err(|e| {
        format!("{e}; give the issuer URL exactly as the authorization server publishes it, e.g. https://login.example.com/realms/team")
    })?;
    let audience = match (&args.oauth_audience, public_url) {
        (Some(audience), _) if !audience.trim().is_empty() => audience.clone(),
        (_, Some(url)) => url.as_str().to_owned(),
        _ => {
            return Err("--oauth-issuer needs the audience tokens must name: --oauth-audience AUDIENCE, or --public-url URL (this endpoint as clients reach it)".into());
        }
    };
    let introspection = match args.introspection_url.as_deref() {
        None => None,
        Some(raw) => {
            let url = crate::oauth::wellknown::checked(raw, "--introspection-url")?;
            let (client_id, client_secret) = super::serve_oauth::client_from_env(
                "MCP_STDIO_INTROSPECTION_CLIENT_ID",
                "MCP_STDIO_INTROSPECTION_CLIENT_SECRET",
                "--introspection-url needs this resource's client credentials at the authorization server",
            )?;
            Some(crate::serve::auth::IntrospectionConfig {
                url,
                client_id,
                client_secret,
                concurrency: args.introspection_concurrency as usize,
                audience_optional: args.introspection_without_audience,
            })
        }
    };
    Ok(Some(ResourceServerConfig {
        introspection,
        issuer,
        audience,
        scopes: args.oauth_scopes.clone(),
        leeway: args.oauth_leeway,
        refetch_interval: args.oauth_jwks_refetch,
        token_cache: args.oauth_token_cache as usize,
        kind_check: if args.oauth_require_at_jwt {
            crate::serve::auth::KindCheck::AtJwt
        } else if args.oauth_no_id_token_check {
            crate::serve::auth::KindCheck::MarkersOnly
        } else {
            crate::serve::auth::KindCheck::Claims
        },
        http: super::serve_oauth::authorization_server_http(),
    }))
}

/// Each `--oauth-scope` is one scope token (RFC 6749 §3.3).
fn check_scopes(scopes: &[String]) -> Result<(), String> {
    match scopes.iter().find(|s| {
        s.is_empty()
            || !s
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
    }) {
        Some(bad) => Err(format!(
            "--oauth-scope '{bad}' is not a scope token (visible ASCII, no quotes or backslashes)"
        )),
        None => Ok(()),
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ChildEraArg {
    Auto,
    Legacy,
    Modern,
}
