//! `mcp-stdio check URL`: its flags, and the report printed as text or JSON with the exit
//! code scripts can rely on (0 answered, 1 did not, 2 bad arguments).

use std::io::Write;

use clap::{Args, ValueEnum};

use super::oauth::OAuthArgs;
use super::tokens::{Connection, client_options, store_config};
use super::{EXIT_USAGE, parse_upstream_url, report_usage_error, run_async};
use crate::check::{CheckConfig, TransportChoice};
use crate::logging::{self, LogFormat};
use crate::oauth::OAuthConfig;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The MCP server, e.g. https://example.com/mcp (serve's own URL works too).
    url: String,

    /// Print the report as one JSON object (for scripts) instead of text.
    #[arg(long)]
    json: bool,

    /// How to reach the server: `auto` finds it as the relay does (Streamable HTTP, then
    /// the 2024-11-05 HTTP+SSE stream when the POST is refused).
    #[arg(long, value_enum, default_value = "auto")]
    transport: TransportArg,

    /// Extra header on every request, 'Name: value'; ${VAR} expands from the
    /// environment. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,

    /// Send `Authorization: Bearer TOKEN` instead of a stored login (prefer the
    /// environment variable: flags show in `ps`).
    #[arg(
        long,
        env = "MCP_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,

    /// List pages read per kind (tools, resources, templates, prompts) before the count
    /// stops and says "or more".
    #[arg(long, value_name = "N", default_value_t = crate::check::DEFAULT_MAX_PAGES, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_pages: u64,

    /// When the server needs a login and none is stored, log in first (browser,
    /// authorization code with PKCE; with --oauth-device, the device flow), as the relay's
    /// --oauth would, and keep the login for the relay.
    #[arg(long)]
    oauth: bool,

    #[command(flatten)]
    oauth_args: OAuthArgs,

    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TransportArg {
    Auto,
    StreamableHttp,
    Sse,
}

pub fn check(args: CheckArgs) -> i32 {
    logging::init(args.connection.log_level, LogFormat::Text);
    let json = args.json;
    let config = match check_config(args) {
        Ok(config) => config,
        Err(message) => {
            report_usage_error(&message);
            return EXIT_USAGE;
        }
    };
    run_check(config, json)
}

/// Runs the check and prints its report (JSON or text); 0 when the server answered, else 1.
pub(super) fn run_check(config: CheckConfig, json: bool) -> i32 {
    run_async(async move {
        let report = crate::check::run(config).await;
        let out = if json {
            let mut line = serde_json::to_string_pretty(&report).expect("JSON serializes");
            line.push('\n');
            line
        } else {
            crate::check::report::text(&report)
        };
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush());
        if report.ok { 0 } else { 1 }
    })
}

fn check_config(args: CheckArgs) -> Result<CheckConfig, String> {
    let url = parse_upstream_url(&args.url)?;
    let env = |name: &str| std::env::var(name).ok();
    let interactive = args.oauth || args.oauth_args.oauth_device;
    let given = super::relay::given_credential(
        args.bearer_token.as_deref(),
        &args.headers,
        interactive,
        &env,
    )?;
    let client = client_options(&args.connection)?;
    let oauth = OAuthConfig {
        settings: args.oauth_args.settings()?,
        interactive,
        store: store_config(args.oauth_args.store)?,
    };
    Ok(CheckConfig {
        url,
        client,
        headers: given.headers,
        credential: given.credential,
        oauth,
        transport: match args.transport {
            TransportArg::Auto => TransportChoice::Auto,
            TransportArg::StreamableHttp => TransportChoice::StreamableHttp,
            TransportArg::Sse => TransportChoice::Sse,
        },
        max_message_size: args.connection.max_message_size as usize,
        max_pages: args.max_pages as usize,
    })
}
