//! `mcp-stdio relay` (and the bare `mcp-stdio URL`): its flags, and their validation into a
//! `RelayConfig` (headers with `${VAR}` expanded, the proxy route, the OAuth settings).

use std::time::Duration;

use clap::Args;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use super::oauth;
use super::{non_negative_seconds, parse_upstream_url, positive_seconds};
use crate::check::CheckConfig;
use crate::http::client::ClientOptions;
use crate::logging::{LogFormat, LogLevel};
use crate::relay::RelayConfig;
use crate::relay::config::TransportChoice;

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// The remote MCP endpoint, e.g. https://example.com/mcp
    url: String,

    /// Extra header on every upstream request, 'Name: value'; ${VAR} expands from the
    /// environment. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,

    /// Send `Authorization: Bearer TOKEN` (prefer the environment variable: flags show in `ps`).
    #[arg(
        long,
        env = "MCP_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,

    /// Seconds allowed to establish a connection.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_connect: Duration,

    /// Longest gap between two reads of a response, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_read: Duration,

    /// Idle limit of the server-initiated GET stream, in seconds (0 disables it).
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    sse_read_timeout: Duration,

    /// Largest single message in either direction, in bytes (per message, never cumulative).
    #[arg(long, value_name = "BYTES", default_value = "10485760", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    max_message_size: u64,

    /// Most host requests waiting for an answer at once; more are refused with an error.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_in_flight: u64,

    /// Deliver upstream answers even for requests the host cancelled.
    #[arg(long)]
    no_cancel_filter: bool,

    /// How long a cancelled id is remembered so its late answer is dropped, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = positive_seconds, allow_hyphen_values = true)]
    cancel_ttl: Duration,

    /// Retries for a request that could not be sent, or that met 429/503.
    #[arg(long, value_name = "N", default_value = "3", value_parser = clap::value_parser!(u32).range(0..=10))]
    max_retries: u32,

    /// Longest Retry-After honoured on 429/503, in seconds; a longer one is reported instead.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    retry_after_max: Duration,

    /// Consecutive failed attempts to resume or reopen an SSE stream before giving up.
    #[arg(long, value_name = "N", default_value = "5", value_parser = clap::value_parser!(u32).range(0..=100))]
    max_reconnects: u32,

    /// Seconds in-flight requests may take to finish at shutdown.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    shutdown_grace: Duration,

    /// Extra trusted root certificate(s), PEM.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,

    /// Diagnostics on stderr: off, error, warn, info, debug or trace.
    #[arg(long, value_enum, default_value = "info", env = "MCP_STDIO_LOG_LEVEL")]
    pub log_level: LogLevel,

    /// Diagnostics format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log in with OAuth (browser, authorization code with PKCE) when the server asks for
    /// it. Without it, a login stored by `mcp-stdio login` is still used and refreshed.
    #[arg(long)]
    oauth: bool,

    #[command(flatten)]
    oauth_args: oauth::OAuthArgs,

    #[command(flatten)]
    audit: super::audit_args::AuditArgs,

    #[command(flatten)]
    otel: super::otel_args::OtelArgs,

    /// Protocol era spoken upstream: auto (probe with server/discover), legacy (the
    /// initialize handshake) or modern (2026-07-28).
    #[arg(long, value_enum, default_value = "auto")]
    protocol_era: ProtocolEra,

    /// HTTP transport: streamable-http, sse (the 2024-11-05 HTTP+SSE transport: a GET
    /// stream plus POSTs to the endpoint it names), or auto (Streamable HTTP, falling back
    /// to HTTP+SSE when the first POST gets 400, 404 or 405).
    #[arg(long, value_enum, default_value = "auto")]
    transport: TransportArg,

    /// Rounds of input a 2026-07-28 server may ask of a legacy host in one call
    /// (input_required); the call is abandoned after that.
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u32).range(1..=100))]
    max_input_rounds: u32,

    /// Probe the server once, print what it speaks (the report of `mcp-stdio check URL`)
    /// and exit: 0 when it answered, 1 when it did not. With --oauth and no stored login it
    /// logs in first. The Python tool's form; `--test` is its deprecated alias.
    #[arg(long, alias = "test")]
    pub check: bool,

    /// Seconds the host may take to answer a question the server asked during a call
    /// (an elicitation, a sampling request, its roots).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = positive_seconds, allow_hyphen_values = true)]
    input_timeout: Duration,

    /// Most 2025-11-25 tasks a legacy host may hold at once when the relay runs them on a
    /// 2026-07-28 server (each is followed until it ends and kept until its ttl); a
    /// task-augmented call past it is refused with an error naming this flag.
    #[arg(long, value_name = "N", default_value = "64", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_tasks: u64,

    /// Seconds the relay keeps such a task at most: the server's ttl when shorter (a task
    /// without one is kept this long); then the task is forgotten.
    #[arg(long, value_name = "SECONDS", default_value = "86400", value_parser = positive_seconds, allow_hyphen_values = true)]
    task_ttl: Duration,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ProtocolEra {
    Auto,
    Legacy,
    Modern,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TransportArg {
    StreamableHttp,
    Sse,
    Auto,
}

/// Checks everything the flags and environment say; `env` looks up variables.
pub fn relay_config(
    args: RelayArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<RelayConfig, String> {
    validate(args, env).map(|(config, _)| config)
}

/// The relay's config, and which credential its headers carry (`check_config` reports it).
fn validate(
    args: RelayArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(RelayConfig, &'static str), String> {
    let url = parse_upstream_url(&args.url)?;
    let uri: http::Uri = url
        .as_str()
        .parse()
        .map_err(|e| format!("URL: {e}; give an http:// or https:// URL"))?;
    // An unusable proxy setting is a bad environment value: say so now, with exit 2.
    crate::http::connect::Route::for_upstream(&uri)?;
    let interactive = args.oauth || args.oauth_args.oauth_device;
    let given = given_credential(
        args.bearer_token.as_deref(),
        &args.headers,
        interactive,
        &env,
    )?;
    let extra_roots = match &args.ca_cert {
        Some(path) => crate::http::client::parse_extra_roots(
            &std::fs::read(path)
                .map_err(|e| format!("--ca-cert: cannot read {}: {e}", path.display()))?,
        )?,
        None => Vec::new(),
    };
    let client = ClientOptions {
        connect_timeout: args.timeout_connect,
        read_timeout: Some(args.timeout_read),
        extra_roots,
    };
    let static_authorization = given.credential != "none";
    let settings = args.oauth_args.settings()?;
    if static_authorization {
        refuse_logins_beside(&settings)?;
    }
    let oauth = match oauth::token_file(&env) {
        _ if static_authorization => None,
        Ok(token_file) => Some(crate::oauth::OAuthConfig {
            settings,
            interactive,
            store: crate::oauth::store::StoreConfig {
                token_file,
                choice: args.oauth_args.store.token_store.into(),
                keyring_timeout: args.oauth_args.store.keyring_timeout,
                python_tokens: crate::oauth::store::file::FileStore::python_path(&env),
            },
        }),
        Err(e) if interactive => return Err(format!("--oauth: {e}")),
        Err(_) => None,
    };
    let config = RelayConfig {
        url,
        headers: given.headers,
        client,
        sse_read_timeout: (!args.sse_read_timeout.is_zero()).then_some(args.sse_read_timeout),
        max_message_size: args.max_message_size as usize,
        max_in_flight: args.max_in_flight as usize,
        cancel_filter: !args.no_cancel_filter,
        cancel_ttl: args.cancel_ttl,
        max_retries: args.max_retries,
        retry_after_cap: args.retry_after_max,
        max_reconnects: args.max_reconnects,
        protocol_era: match args.protocol_era {
            ProtocolEra::Auto => crate::relay::config::EraChoice::Auto,
            ProtocolEra::Legacy => crate::relay::config::EraChoice::Legacy,
            ProtocolEra::Modern => crate::relay::config::EraChoice::Modern,
        },
        transport: match args.transport {
            TransportArg::StreamableHttp => TransportChoice::StreamableHttp,
            TransportArg::Sse => TransportChoice::Sse,
            TransportArg::Auto => TransportChoice::Auto,
        },
        max_input_rounds: args.max_input_rounds,
        input_timeout: args.input_timeout,
        max_tasks: args.max_tasks as usize,
        task_ttl: args.task_ttl,
        shutdown_grace: args.shutdown_grace,
        oauth,
        audit: args.audit.settings(true)?,
        telemetry: args.otel.settings()?,
    };
    Ok((config, given.credential))
}

/// A static `Authorization` turns OAuth off, so a flag that asks for a particular login
/// beside it would be silently ignored: refused instead.
fn refuse_logins_beside(settings: &crate::oauth::flow::Settings) -> Result<(), String> {
    let asked = if settings.workload_token_file.is_some() {
        "--workload-token-file"
    } else if settings.idp.is_some() {
        "--idp-issuer"
    } else if settings.dpop == crate::oauth::dpop::DpopMode::Always {
        "--dpop always"
    } else {
        return Ok(());
    };
    Err(format!(
        "{asked} cannot be combined with --bearer-token / MCP_BEARER_TOKEN or -H Authorization: a static credential turns OAuth off; choose one way to authenticate"
    ))
}

/// The credential given on the command line: `--bearer-token` / `MCP_BEARER_TOKEN` and
/// the `-H` headers, parsed the one way the relay and both forms of `check` share.
pub(super) struct GivenCredential {
    pub headers: HeaderMap,
    /// `none`, `bearer-token` or `header` (an `-H Authorization`, which wins).
    pub credential: &'static str,
}

/// Parses the given credential and headers; a login flag (`interactive`) beside a static
/// `Authorization` is refused, since only one of them could be used.
pub(super) fn given_credential(
    bearer_token: Option<&str>,
    raw_headers: &[String],
    interactive: bool,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<GivenCredential, String> {
    let mut headers = HeaderMap::new();
    let mut credential = "none";
    if let Some(token) = bearer_token {
        if token.is_empty() {
            tracing::warn!("the bearer token is empty; no Authorization header will be sent");
        } else {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                "--bearer-token / MCP_BEARER_TOKEN: the token holds a control character or non-ASCII byte; pass the bare token".to_owned()
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
            credential = "bearer-token";
        }
    }
    for raw in raw_headers {
        let (name, value) = parse_header(raw, env)?;
        if name == AUTHORIZATION {
            if headers.contains_key(AUTHORIZATION) {
                tracing::warn!("-H Authorization overrides --bearer-token");
            }
            credential = "header";
        }
        headers.insert(name, value);
    }
    if interactive && credential != "none" {
        return Err("--oauth / --oauth-device cannot be combined with --bearer-token / MCP_BEARER_TOKEN or -H Authorization; choose one way to authenticate".into());
    }
    Ok(GivenCredential {
        headers,
        credential,
    })
}

/// The relay's flags read as a `check` (the Python tool's `--check`): the same headers,
/// credential, connection, transport and login settings, validated the same way.
pub fn check_config(
    args: RelayArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<CheckConfig, String> {
    let oauth = crate::oauth::OAuthConfig {
        settings: args.oauth_args.settings()?,
        interactive: args.oauth || args.oauth_args.oauth_device,
        store: super::tokens::store_config(args.oauth_args.store)?,
    };
    let (relay, credential) = validate(args, env)?;
    Ok(CheckConfig {
        url: relay.url,
        client: relay.client,
        headers: relay.headers,
        credential,
        oauth,
        transport: match relay.transport {
            TransportChoice::StreamableHttp => crate::check::TransportChoice::StreamableHttp,
            TransportChoice::Sse => crate::check::TransportChoice::Sse,
            TransportChoice::Auto => crate::check::TransportChoice::Auto,
        },
        max_message_size: relay.max_message_size,
        max_pages: crate::check::DEFAULT_MAX_PAGES as usize,
    })
}

/// Parses `-H 'Name: value'`, expanding `${VAR}` in the value.
fn parse_header(
    raw: &str,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = raw.split_once(':').ok_or_else(|| {
        format!(
            "-H/--header '{}': expected 'Name: value'",
            redact_header(raw)
        )
    })?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
        format!("-H/--header: '{}' is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)", name.trim())
    })?;
    let value = crate::env_expand::expand(value.trim(), env)
        .map_err(|e| format!("-H/--header {name}: {e}"))?;
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(format!(
            "-H/--header {name}: the value holds CR, LF or NUL, which would split the header"
        ));
    }
    let mut value = HeaderValue::from_str(&value).map_err(|_| {
        format!("-H/--header {name}: the value holds a control character or non-ASCII byte")
    })?;
    // Any user header may carry a credential: never show it in debug output.
    value.set_sensitive(true);
    Ok((name, value))
}

/// `Name: value` with the value hidden, for error messages.
fn redact_header(raw: &str) -> String {
    if raw.len() > 40 {
        format!("{}…", &raw[..raw.floor_char_boundary(40)])
    } else {
        raw.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_environment_variables_in_headers() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        let (name, value) = parse_header("X-Api-Key: key-${TOKEN}", &env).unwrap();
        assert_eq!(name, "x-api-key");
        assert_eq!(value, "key-s3cret");
        assert!(value.is_sensitive());
        assert!(
            parse_header("X: ${MISSING}", &env)
                .unwrap_err()
                .contains("MISSING is not set")
        );
        assert!(parse_header("X: ${BAD-NAME}", &env).is_err());
    }

    #[test]
    fn rejects_bad_headers() {
        let env = |_: &str| Some("a\r\nInjected: 1".to_owned());
        assert!(parse_header("no colon", &env).is_err());
        assert!(parse_header("Bad Name: x", &env).is_err());
        assert!(
            parse_header("X: ${V}", &env)
                .unwrap_err()
                .contains("CR, LF or NUL")
        );
    }
}
