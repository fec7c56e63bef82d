//! `mcp-stdio serve`: its flags (`serve_args.rs`) checked and made a `ServeConfig`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::serve_args::ChildEraArg;
pub use super::serve_args::ServeArgs;
use crate::secret::Secret;
use crate::serve::ServeConfig;
use crate::serve::auth::ResourceServerConfig;
use crate::serve::child::ChildCommand;
use crate::serve::child_era::ChildEraChoice;
use crate::serve::guard::Guards;
use crate::serve::spares::{SpareBudget, SparePolicy};

/// Checks the flags; `token_from_flag` says whether the token came from the command line
/// (which `ps` shows) rather than the environment.
pub fn serve_config(args: ServeArgs, token_from_flag: bool) -> Result<ServeConfig, String> {
    let mut args = args;
    // clap takes an unknown flag as the start of the server's command.
    if let Some(flag) = args.command.first().filter(|word| word.starts_with('-')) {
        return Err(format!(
            "{flag} is not a flag of `mcp-stdio serve` (see --help); a stdio server's command goes after `--`, e.g. serve -- npx -y @modelcontextprotocol/server-everything"
        ));
    }
    if let Some(file) = &args.config {
        config_file_rules(&args, file)?;
    }
    let command = child_command(&mut args)?;
    if !args.path.starts_with('/') || args.path.contains(['?', '#']) {
        return Err(format!(
            "--path '{}' must be a path starting with '/', e.g. /mcp",
            args.path
        ));
    }
    let auth_token = auth_token(args.auth_token.take(), token_from_flag)?;
    let public_url = public_url(args.public_url.as_deref())?;
    check_scopes(&args.oauth_scopes)?;
    let mut auth_server = super::serve_oauth::auth_server(
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
    if let (Some(cluster), Some(server)) = (&cluster, &mut auth_server) {
        if matches!(server.store, crate::authserver::store::Location::Sqlite(_)) {
            return Err("--enable-oauth among replicas needs a store they share: --oauth-store postgres://USER@HOST/DB (a SQLite file belongs to one replica)".into());
        }
        server.cluster_key = Some(cluster.key.clone());
    }
    one_way_to_check_callers(
        auth_token.is_some(),
        resource_server.is_some(),
        auth_server.is_some(),
    )?;
    let guards = guards(&mut args)?;
    let ttl = (!args.session_idle_ttl.is_zero()).then_some(args.session_idle_ttl);
    let spares = spare_policy(&args)?;
    let aggregate =
        super::serve_aggregate::aggregate_flags(&args.aggregate, args.config.is_some())?;
    Ok(ServeConfig {
        command,
        listen: SocketAddr::new(args.host, args.port),
        path: args.path,
        auth_token,
        resource_server,
        auth_server,
        public_url,
        guards,
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
        max_tasks_per_principal: args.max_tasks_per_principal as usize,
        task_ttl: args.task_ttl,
        max_task_questions: args.max_task_questions as usize,
        cluster,
        reload_grace: args.reload_grace,
        aggregate,
        policy: crate::serve::PolicySource {
            file: args.policy,
            limits: args.policy_limits.limits(),
        },
        policing: None,
        audit: args.audit.settings(false)?,
        auditor: None,
        telemetry: args.otel.settings()?,
    })
}

/// The stdio server to publish: the command given, or with neither a command nor
/// `--config` the built-in sandbox over the current directory.
fn child_command(args: &mut ServeArgs) -> Result<ChildCommand, String> {
    if args.command.is_empty() && args.config.is_none() {
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
    let command = ChildCommand::new(std::mem::take(&mut args.command));
    // With --config the servers come from the file (each checked there).
    if args.config.is_none() && crate::serve::child::find_program(&command).is_none() {
        return Err(format!(
            "cannot find the command '{}': give a path to an executable, or a program on PATH",
            command.program()
        ));
    }
    Ok(command)
}

/// `--auth-token` / `MCP_STDIO_SERVE_TOKEN`: blank is none; otherwise visible ASCII.
fn auth_token(token: Option<String>, token_from_flag: bool) -> Result<Option<Secret>, String> {
    match token {
        Some(token) if token.trim().is_empty() => Ok(None),
        Some(token) if !crate::era::headers::is_visible_ascii(token.as_bytes()) => {
            Err("--auth-token / MCP_STDIO_SERVE_TOKEN must be visible ASCII without spaces".into())
        }
        Some(token) => {
            if token_from_flag {
                tracing::warn!(
                    "--auth-token on the command line is visible to every user in `ps`; prefer MCP_STDIO_SERVE_TOKEN"
                );
            }
            Ok(Some(Secret::new(token)))
        }
        None => Ok(None),
    }
}

/// `--public-url`: an http(s) URL with a host and no fragment.
fn public_url(raw: Option<&str>) -> Result<Option<url::Url>, String> {
    raw.map(|raw| {
        url::Url::parse(raw)
            .ok()
            .filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.fragment().is_none()
            })
            .ok_or_else(|| {
                format!(
                    "--public-url '{raw}' must be an http(s) URL, e.g. https://mcp.example.com/mcp"
                )
            })
    })
    .transpose()
}

/// At most one of the three ways to check callers.
fn one_way_to_check_callers(token: bool, issuer: bool, embedded: bool) -> Result<(), String> {
    let modes = [
        (token, "--auth-token (one shared secret)"),
        (
            issuer,
            "--oauth-issuer (tokens from your identity provider)",
        ),
        (embedded, "--enable-oauth (serve issues tokens itself)"),
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
    Ok(())
}

/// The `Host` / `Origin` guards: `--allow-origin` (origins only), `--allow-host` and
/// `--trusted-proxy` (CIDRs or addresses).
fn guards(args: &mut ServeArgs) -> Result<Guards, String> {
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
    Ok(Guards {
        loopback: args.host.is_loopback(),
        bind_ip: args.host,
        port: args.port,
        allowed_origins: std::mem::take(&mut args.allow_origin),
        allowed_hosts: std::mem::take(&mut args.allow_host),
        trusted_proxies,
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
    if args.path != "/mcp" && !args.aggregate.aggregate {
        return Err("--config cannot be used with --path (each server is at /NAME/mcp; --path is where --aggregate publishes them all)".into());
    }
    let loaded = crate::serve::config_file::load(file, &|name| std::env::var(name).ok())?;
    let flags = super::serve_aggregate::aggregate_flags(&args.aggregate, true)?;
    let servers: Vec<crate::serve::config_aggregates::Server<'_>> = loaded
        .entries
        .iter()
        .map(|e| (e.name.as_str(), &e.aliases, e.checks_callers_itself()))
        .collect();
    crate::serve::config_aggregates::specs(&loaded.aggregates, &servers, &flags, &args.path)
        .map(|_| ())
        .map_err(|e| format!("--config {}: {e}", file.display()))
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
