//! The command line: clap definitions, and the validation that turns flags and environment
//! variables into a checked configuration (or exit code 2 with a one-line reason).

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use url::Url;

mod oauth;
mod sandbox;
mod serve;
mod tokens;

use crate::http::client::ClientOptions;
use crate::logging::{self, LogFormat, LogLevel};
use crate::relay::RelayConfig;
use crate::relay::config::TransportChoice;

/// Exit code for a bad flag, argument or environment value.
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "mcp-stdio",
    version,
    about = "Gateway between stdio-only MCP hosts and remote MCP servers",
    long_about = "Gateway between stdio-only MCP hosts and remote MCP servers.\n\n\
                  `mcp-stdio URL` is short for `mcp-stdio relay URL`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Bridge stdin/stdout to a remote MCP server over Streamable HTTP.
    Relay(RelayArgs),
    /// Publish a local stdio MCP server as a Streamable HTTP endpoint (with no command: the
    /// built-in sandbox over the current directory).
    Serve(serve::ServeArgs),
    /// The built-in read-only workspace tool server, on stdio.
    Sandbox(sandbox::SandboxArgs),
    /// Log in to a server with OAuth and store the tokens.
    Login(tokens::LoginArgs),
    /// Forget the tokens of a server (or of all servers).
    Logout(tokens::LogoutArgs),
    /// Show the stored logins (never the tokens).
    Status(tokens::StatusArgs),
    /// Print a fresh access token for scripts (refreshing it if needed).
    Token(tokens::TokenArgs),
}

#[derive(Debug, Args)]
struct RelayArgs {
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
    log_level: LogLevel,

    /// Diagnostics format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,

    /// Log in with OAuth (browser, authorization code with PKCE) when the server asks for
    /// it. Without it, a login stored by `mcp-stdio login` is still used and refreshed.
    #[arg(long)]
    oauth: bool,

    #[command(flatten)]
    oauth_args: oauth::OAuthArgs,

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

    /// Seconds the host may take to answer a question the server asked during a call
    /// (an elicitation, a sampling request, its roots).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = positive_seconds, allow_hyphen_values = true)]
    input_timeout: Duration,
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

/// Parses the process arguments, runs the chosen mode and returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse_from(with_default_subcommand(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; clap prints them where they belong.
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { 0 };
        }
    };
    match cli.command {
        Command::Relay(args) => {
            logging::init(args.log_level, args.log_format);
            let config = match relay_config(args, |name| std::env::var(name).ok()) {
                Ok(config) => config,
                Err(message) => {
                    report_usage_error(&message);
                    return EXIT_USAGE;
                }
            };
            run_async(crate::relay::run(config))
        }
        Command::Serve(args) => {
            logging::init(args.log_level, args.log_format);
            let from_flag =
                std::env::args().any(|a| a == "--auth-token" || a.starts_with("--auth-token="));
            let config = match serve::serve_config(args, from_flag) {
                Ok(config) => config,
                Err(message) => {
                    report_usage_error(&message);
                    return EXIT_USAGE;
                }
            };
            run_async(crate::serve::run(config))
        }
        Command::Sandbox(args) => {
            logging::init(args.log_level, args.log_format);
            let config = match sandbox::sandbox_config(args) {
                Ok(config) => config,
                Err(message) => {
                    report_usage_error(&message);
                    return EXIT_USAGE;
                }
            };
            run_async(crate::sandbox::run(config))
        }
        Command::Login(args) => tokens::login(args),
        Command::Logout(args) => tokens::logout(args),
        Command::Status(args) => tokens::status(args),
        Command::Token(args) => tokens::token(args),
    }
}

#[allow(clippy::print_stderr)] // the one place a usage error is printed: before any logging matters
fn report_usage_error(message: &str) {
    eprintln!("mcp-stdio: error: {message}");
}

fn run_async<F: std::future::Future<Output = i32>>(future: F) -> i32 {
    // One thread runs everything: relaying is I/O-bound, and every hop between worker
    // threads costs a futex wake-up that is dearer than the work it moves.
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let code = runtime.block_on(future);
            // stdin is read on a blocking thread that cannot be interrupted; waiting for it
            // (what dropping the runtime does) would hang until the host writes a newline.
            runtime.shutdown_background();
            code
        }
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            1
        }
    }
}

const SUBCOMMANDS: &[&str] = &[
    "relay", "serve", "sandbox", "login", "logout", "status", "token", "help",
];

/// `mcp-stdio [OPTIONS] URL` (the Python tool's form) means `mcp-stdio relay [OPTIONS] URL`.
fn with_default_subcommand(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let is_top_level =
        SUBCOMMANDS.contains(&first) || matches!(first, "-h" | "--help" | "-V" | "--version");
    if args.len() > 1 && !is_top_level {
        args.insert(1, "relay".into());
    }
    args
}

fn positive_seconds(value: &str) -> Result<Duration, String> {
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "'{value}' is not a number of seconds above 0 and at most 86400, e.g. 30 or 0.5"
        )),
    }
}

fn non_negative_seconds(value: &str) -> Result<Duration, String> {
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "'{value}' is not a number of seconds from 0 to 86400, e.g. 0 or 300"
        )),
    }
}

/// Checks everything the flags and environment say; `env` looks up variables.
fn relay_config(
    args: RelayArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<RelayConfig, String> {
    let url = parse_upstream_url(&args.url)?;
    let uri: http::Uri = url
        .as_str()
        .parse()
        .map_err(|e| format!("URL: {e}; give an http:// or https:// URL"))?;
    // An unusable proxy setting is a bad environment value: say so now, with exit 2.
    crate::http::connect::Route::for_upstream(&uri)?;
    let mut headers = HeaderMap::new();
    if let Some(token) = args.bearer_token.as_deref() {
        if token.is_empty() {
            tracing::warn!("the bearer token is empty; no Authorization header will be sent");
        } else {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                "--bearer-token / MCP_BEARER_TOKEN: the token holds a control character or non-ASCII byte; pass the bare token".to_owned()
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
    }
    for raw in &args.headers {
        let (name, value) = parse_header(raw, &env)?;
        if name == AUTHORIZATION && headers.contains_key(AUTHORIZATION) {
            tracing::warn!("-H Authorization overrides --bearer-token");
        }
        headers.insert(name, value);
    }
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
    let static_authorization = headers.contains_key(AUTHORIZATION);
    let interactive = args.oauth || args.oauth_args.oauth_device;
    if interactive && static_authorization {
        return Err("--oauth / --oauth-device cannot be combined with --bearer-token / MCP_BEARER_TOKEN or -H Authorization; choose one way to authenticate".into());
    }
    let settings = args.oauth_args.settings()?;
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
    Ok(RelayConfig {
        url,
        headers,
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
        shutdown_grace: args.shutdown_grace,
        oauth,
    })
}

fn parse_upstream_url(raw: &str) -> Result<Url, String> {
    let hint =
        "give the server's endpoint as an http(s) URL with a host, e.g. https://example.com/mcp";
    let url = Url::parse(raw).map_err(|e| format!("URL '{raw}' is not valid ({e}); {hint}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "URL '{raw}' is not an http(s) URL with a host; {hint}"
        ));
    }
    if url.fragment().is_some() {
        return Err(format!(
            "URL '{raw}' has a #fragment, which HTTP never sends; remove it"
        ));
    }
    Ok(url)
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
    let value = expand_env(value.trim(), env).map_err(|e| format!("-H/--header {name}: {e}"))?;
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

/// Replaces `${VAR}` with the variable's value; an unset variable is an error, since
/// sending an empty credential silently is worse than refusing to start.
fn expand_env(value: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("'${' without a closing '}'")?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "'${{{name}}}' is not a variable name (letters, digits and _ only)"
            ));
        }
        out.push_str(
            &env(name).ok_or_else(|| format!("the environment variable {name} is not set"))?,
        );
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        with_default_subcommand(list.iter().map(OsString::from))
    }

    #[test]
    fn a_bare_url_means_relay() {
        assert_eq!(
            args(&["mcp-stdio", "https://x/mcp"]),
            args(&["mcp-stdio", "relay", "https://x/mcp"])
        );
        assert_eq!(
            args(&["mcp-stdio", "-H", "a: b", "https://x/mcp"])[1],
            "relay"
        );
        assert_eq!(args(&["mcp-stdio", "--version"])[1], "--version");
    }

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

    #[test]
    fn validates_the_url() {
        assert!(parse_upstream_url("https://example.com/mcp").is_ok());
        assert!(parse_upstream_url("logout").is_err());
        assert!(parse_upstream_url("ftp://example.com/").is_err());
        assert!(parse_upstream_url("http://").is_err());
    }

    #[test]
    fn seconds_must_be_sane() {
        assert!(positive_seconds("0").is_err());
        assert!(positive_seconds("nan").is_err());
        assert_eq!(positive_seconds("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(non_negative_seconds("0").unwrap(), Duration::ZERO);
    }
}
