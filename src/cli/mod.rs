//! The command line: clap definitions, and the validation that turns flags and environment
//! variables into a checked configuration (or exit code 2 with a one-line reason).

use std::ffi::OsString;
use std::time::Duration;

use clap::{Parser, Subcommand};
use url::Url;

mod audit_args;
mod check;
mod docs;
mod oauth;
mod otel_args;
mod policy;
mod relay;
mod sandbox;
mod serve;
mod serve_aggregate;
mod serve_args;
mod serve_cluster;
mod serve_oauth;
mod serve_users;
mod tokens;

use crate::logging;

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
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Bridge stdin/stdout to a remote MCP server over Streamable HTTP.
    Relay(Box<relay::RelayArgs>),
    /// Publish a local stdio MCP server as a Streamable HTTP endpoint (with no command: the
    /// built-in sandbox over the current directory).
    Serve(Box<serve::ServeArgs>),
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
    /// Probe a server and say what it speaks: transport, era, server, capabilities, counts,
    /// authorization, timings (a stored login is used; no token is printed).
    Check(Box<check::CheckArgs>),
    /// Work with policy files (`policy check FILE --as PRINCIPAL.json --call TOOL`).
    Policy(policy::PolicyArgs),
    /// Print a shell completion script (bash, zsh, fish or powershell).
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), or write one page per subcommand with --dir.
    Manpage(docs::ManpageArgs),
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
        Command::Relay(args) if args.check => {
            logging::init(args.log_level, args.log_format);
            if std::env::args().any(|a| a == "--test") {
                tracing::warn!("--test is deprecated: use `mcp-stdio check URL` (or --check)");
            }
            match relay::check_config(*args, |name| std::env::var(name).ok()) {
                Ok(config) => check::run_check(config, false),
                Err(message) => {
                    report_usage_error(&message);
                    EXIT_USAGE
                }
            }
        }
        Command::Relay(args) => {
            logging::init(args.log_level, args.log_format);
            let config = match relay::relay_config(*args, |name| std::env::var(name).ok()) {
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
            let file = args.config.clone();
            let config = match serve::serve_config(*args, from_flag) {
                Ok(config) => config,
                Err(message) => {
                    report_usage_error(&message);
                    return EXIT_USAGE;
                }
            };
            match file {
                Some(file) => run_async(crate::serve::run_servers(config, file)),
                None => run_async(crate::serve::run(config)),
            }
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
        Command::Check(args) => check::check(*args),
        Command::Policy(args) => policy::run(args),
        Command::Completions(args) => docs::completions(args),
        Command::Manpage(args) => docs::manpage(args),
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
    "relay",
    "serve",
    "sandbox",
    "login",
    "logout",
    "status",
    "token",
    "check",
    "completions",
    "manpage",
    "help",
    "policy",
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
