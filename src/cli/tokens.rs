//! `login`, `logout`, `status` and `token`: managing stored OAuth logins from a terminal.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::oauth::{OAuthArgs, StoreArgs, token_file};
use super::{EXIT_USAGE, parse_upstream_url, positive_seconds, report_usage_error, run_async};
use crate::http::client::{ClientOptions, parse_extra_roots};
use crate::logging::{self, LogFormat, LogLevel, notice};
use crate::oauth::OAuthConfig;
use crate::oauth::flow::ServerAuth;
use crate::oauth::http::OAuthHttp;
use crate::oauth::revoke::revoke;
use crate::oauth::store::backend::TokenStore;
use crate::oauth::store::file::FileStore;
use crate::oauth::store::{Grant, StoreConfig, grant_key};
use crate::oauth::token::{TokenFailure, needs_refresh, unix_now};

/// The connection flags the terminal commands share with `relay`.
#[derive(Debug, Args)]
pub struct Connection {
    /// Extra trusted root certificate(s), PEM.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,

    /// Seconds allowed to establish a connection.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_connect: Duration,

    /// Longest wait for an answer from the server or its authorization server, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = positive_seconds, allow_hyphen_values = true)]
    timeout_read: Duration,

    /// Largest metadata or token answer read, in bytes.
    #[arg(long, value_name = "BYTES", default_value = "1048576", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    pub(super) max_message_size: u64,

    /// Diagnostics on stderr: off, error, warn, info, debug or trace.
    #[arg(long, value_enum, default_value = "warn", env = "MCP_STDIO_LOG_LEVEL")]
    pub(super) log_level: LogLevel,
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The MCP server, e.g. https://example.com/mcp
    url: String,
    #[command(flatten)]
    oauth: OAuthArgs,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The MCP server whose logins to forget (and revoke, where the server allows).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    url: Option<String>,
    /// Forget every stored login and client registration.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this server.
    url: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The MCP server, e.g. https://example.com/mcp
    url: String,
    #[command(flatten)]
    oauth: OAuthArgs,
    #[command(flatten)]
    connection: Connection,
}

/// Logging, then the server's OAuth state; a bad flag is reported and becomes exit 2.
fn prepare(url: &str, oauth: &OAuthArgs, connection: &Connection) -> Result<ServerAuth, i32> {
    logging::init(connection.log_level, LogFormat::Text);
    server_auth(url, oauth, connection).map_err(|e| {
        report_usage_error(&e);
        EXIT_USAGE
    })
}

/// The HTTP settings of the terminal commands.
pub(super) fn client_options(connection: &Connection) -> Result<ClientOptions, String> {
    let extra_roots = match &connection.ca_cert {
        Some(path) => parse_extra_roots(
            &std::fs::read(path)
                .map_err(|e| format!("--ca-cert: cannot read {}: {e}", path.display()))?,
        )?,
        None => Vec::new(),
    };
    Ok(ClientOptions {
        connect_timeout: connection.timeout_connect,
        read_timeout: Some(connection.timeout_read),
        extra_roots,
    })
}

/// Validation shared by `login` and `token`.
fn server_auth(
    url: &str,
    oauth: &OAuthArgs,
    connection: &Connection,
) -> Result<ServerAuth, String> {
    let server = parse_upstream_url(url)?;
    let config = OAuthConfig {
        settings: oauth.settings()?,
        interactive: false,
        store: store_config(oauth.store)?,
    };
    config.server_auth(
        client_options(connection)?,
        connection.max_message_size as usize,
        server,
    )
}

/// Where a terminal command's grants are, as the relay would find them.
pub(super) fn store_config(args: StoreArgs) -> Result<StoreConfig, String> {
    let env = |name: &str| std::env::var(name).ok();
    Ok(StoreConfig {
        token_file: token_file(env)?,
        choice: args.token_store.into(),
        keyring_timeout: args.keyring_timeout,
        python_tokens: FileStore::python_path(env),
    })
}

fn store(args: StoreArgs) -> Result<TokenStore, String> {
    store_config(args)?.open()
}

pub fn login(args: LoginArgs) -> i32 {
    let auth = match prepare(&args.url, &args.oauth, &args.connection) {
        Ok(auth) => auth,
        Err(code) => return code,
    };
    run_async(async move {
        let challenge = auth.probe().await;
        let _exclusive = auth.exclusive().await;
        match auth.login(challenge.as_ref()).await {
            Ok(grant) => {
                notice(&format!(
                    "logged in to {} ({}); tokens are in {}",
                    auth.server,
                    describe(&grant),
                    auth.store.describe()
                ));
                0
            }
            Err(e) => {
                notice(&format!("login failed: {e}"));
                1
            }
        }
    })
}

pub fn token(args: TokenArgs) -> i32 {
    let auth = match prepare(&args.url, &args.oauth, &args.connection) {
        Ok(auth) => auth,
        Err(code) => return code,
    };
    run_async(async move {
        let grant = match auth.stored() {
            Ok(Some(grant)) => grant,
            Ok(None) => {
                notice(&format!(
                    "no login stored for {}; run `mcp-stdio login {}` first",
                    auth.server, auth.server
                ));
                return 1;
            }
            Err(e) => {
                notice(&e);
                return 1;
            }
        };
        let leeway = auth.settings.refresh_leeway.as_secs();
        let grant = if needs_refresh(&grant, unix_now(), leeway) {
            match auth.refresh(&grant).await {
                Ok(fresh) => fresh,
                Err(TokenFailure::Dead(e) | TokenFailure::Passing(e)) => {
                    notice(&format!("could not refresh the token: {e}"));
                    return 1;
                }
            }
        } else {
            grant
        };
        if grant.dpop_key.is_some() {
            // The key never leaves the store, so the token alone cannot be used.
            notice(
                "this login's token is DPoP-bound: it works only with a proof signed by the key mcp-stdio keeps, so use the relay (`mcp-stdio URL`) rather than the bare token",
            );
        }
        notice("printing an access token: keep it out of logs and shell history");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", grant.access_token.expose());
        0
    })
}

pub fn logout(args: LogoutArgs) -> i32 {
    logging::init(args.connection.log_level, LogFormat::Text);
    let store = match store(args.store) {
        Ok(store) => store,
        Err(e) => {
            report_usage_error(&e);
            return EXIT_USAGE;
        }
    };
    let server = match args.url.as_deref().map(parse_upstream_url) {
        Some(Ok(server)) => Some(server),
        Some(Err(e)) => {
            report_usage_error(&e);
            return EXIT_USAGE;
        }
        None => None,
    };
    let options = match client_options(&args.connection) {
        Ok(options) => options,
        Err(e) => {
            report_usage_error(&e);
            return EXIT_USAGE;
        }
    };
    run_async(async move {
        let mut document = match store.load() {
            Ok(document) => document,
            Err(e) => {
                notice(&e);
                return 1;
            }
        };
        let key = server.as_ref().map(|s| grant_key(s, None));
        let leaving: Vec<(String, Grant)> = document
            .grants
            .iter()
            .filter(|(k, _)| key.as_deref().is_none_or(|key| belongs_to(k, key)))
            .map(|(k, g)| (k.clone(), g.clone()))
            .collect();
        let http = OAuthHttp::new(options, args.connection.max_message_size as usize);
        let mut revoked = 0;
        for (stored, grant) in &leaving {
            let client = document.registrations.get(&grant.issuer);
            match revoke(&http, grant, client).await {
                Ok(true) => revoked += 1,
                Ok(false) => {}
                Err(e) => notice(&format!(
                    "could not revoke the login for {stored} ({e}); it is deleted here anyway"
                )),
            }
            document.grants.remove(stored);
        }
        if args.all {
            document.registrations.clear();
        }
        let saved = if args.all {
            store.clear()
        } else {
            store.save(&document)
        };
        if let Err(e) = saved {
            notice(&e);
            return 1;
        }
        notice(&match (args.all, leaving.len()) {
            (true, n) => format!(
                "removed {n} stored login(s) and every client registration; {revoked} revoked at the server"
            ),
            (false, 0) => "no login was stored for that server".into(),
            (false, n) => format!("removed {n} stored login(s); {revoked} revoked at the server"),
        });
        0
    })
}

pub fn status(args: StatusArgs) -> i32 {
    let store = match store(args.store) {
        Ok(store) => store,
        Err(e) => {
            report_usage_error(&e);
            return EXIT_USAGE;
        }
    };
    let filter = match args.url.as_deref().map(parse_upstream_url) {
        Some(Ok(server)) => Some(grant_key(&server, None)),
        Some(Err(e)) => {
            report_usage_error(&e);
            return EXIT_USAGE;
        }
        None => None,
    };
    let document = match store.load() {
        Ok(document) => document,
        Err(e) => {
            notice(&e);
            return 1;
        }
    };
    let now = unix_now();
    let backend = store.describe();
    let entries: Vec<(&String, &Grant)> = document
        .grants
        .iter()
        .filter(|(key, _)| filter.as_deref().is_none_or(|f| belongs_to(key, f)))
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        let list: Vec<serde_json::Value> =
            entries
                .iter()
                .map(|(key, grant)| {
                    serde_json::json!({
                        "server": key,
                        "issuer": grant.issuer,
                        "scope": grant.scope,
                        "expires_at": grant.expires_at,
                        "expires_in_s": grant.expires_at.map(|at| at as i64 - now as i64),
                        "refresh_token": grant.refresh_token.is_some(),
                        "token_type": token_type(grant),
                        "store": backend,
                    })
                })
                .chain(document.idp_logins.iter().filter(|_| filter.is_none()).map(
                    |(key, login)| {
                        serde_json::json!({
                            "identity_provider": key,
                            "expires_at": login.expires_at,
                            "refresh_token": login.refresh_token.is_some(),
                            "store": backend,
                        })
                    },
                ))
                .collect();
        let _ = writeln!(out, "{}", serde_json::Value::Array(list));
        return 0;
    }
    if entries.is_empty() && document.idp_logins.is_empty() {
        let _ = writeln!(out, "no stored logins ({backend})");
    }
    // Identity provider logins (enterprise-managed authorization) serve many servers, so
    // they are listed only when no server was named.
    for (key, login) in document.idp_logins.iter().filter(|_| filter.is_none()) {
        let _ = writeln!(
            out,
            "identity provider {key}\n  ID token expires: {}\n  refresh: {}\n  store:   {backend}",
            expiry(login.expires_at, now),
            if login.refresh_token.is_some() {
                "yes"
            } else {
                "no"
            },
        );
    }
    for (key, grant) in entries {
        let _ = writeln!(
            out,
            "{key}\n  issuer:  {}\n  token:   {}\n  scopes:  {}\n  expires: {}\n  refresh: {}\n  store:   {backend}",
            grant.issuer,
            if grant.dpop_key.is_some() {
                "DPoP-bound (its key is kept with it)"
            } else {
                "Bearer"
            },
            grant.scope.as_deref().unwrap_or("(none named)"),
            expiry(grant.expires_at, now),
            if grant.refresh_token.is_some() {
                "yes"
            } else {
                "no"
            },
        );
    }
    0
}

/// `DPoP` for a token bound to a key, else `Bearer`.
fn token_type(grant: &Grant) -> &'static str {
    if grant.dpop_key.is_some() {
        "DPoP"
    } else {
        "Bearer"
    }
}

/// Whether a stored key is the server `key` (with or without a distinct resource).
fn belongs_to(stored: &str, key: &str) -> bool {
    stored == key || stored.starts_with(&format!("{key} resource="))
}

fn describe(grant: &Grant) -> String {
    format!(
        "scopes: {}; expires: {}",
        grant.scope.as_deref().unwrap_or("(none named)"),
        expiry(grant.expires_at, unix_now())
    )
}

fn expiry(expires_at: Option<u64>, now: u64) -> String {
    match expires_at {
        None => "no expiry given".into(),
        Some(at) if at > now => format!("in {}", human(at - now)),
        Some(at) => format!("{} ago (refreshed on next use)", human(now - at)),
    }
}

fn human(seconds: u64) -> String {
    match seconds {
        0..=119 => format!("{seconds} s"),
        120..=7199 => format!("{} min", seconds / 60),
        _ => format!("{} h", seconds / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_expiry_read_well() {
        assert!(belongs_to("https://h/mcp", "https://h/mcp"));
        assert!(belongs_to(
            "https://h/mcp resource=https://api",
            "https://h/mcp"
        ));
        assert!(!belongs_to("https://h/mcp2", "https://h/mcp"));
        assert_eq!(expiry(None, 0), "no expiry given");
        assert_eq!(expiry(Some(3700), 100), "in 60 min");
        assert_eq!(expiry(Some(100), 160), "60 s ago (refreshed on next use)");
    }
}
