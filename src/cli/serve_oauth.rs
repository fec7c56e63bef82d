//! `mcp-stdio serve --enable-oauth`: the embedded authorization server's flags and their
//! validation into an `AuthServerConfig`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::positive_seconds;
use crate::authserver::AuthServerConfig;
use crate::authserver::login::LoginConfig;
use crate::authserver::store::{Limits, Location};

#[derive(Debug, Args)]
pub struct EmbeddedArgs {
    /// Be an OAuth 2.1 authorization server for this endpoint: clients register, users
    /// consent, tokens are issued here. Not with --auth-token or --oauth-issuer.
    #[arg(long)]
    pub(super) enable_oauth: bool,

    /// Where the authorization server keeps clients and grants: sqlite:PATH (default:
    /// $XDG_STATE_HOME/mcp-stdio/serve-oauth-PORT.db) or postgres://USER@HOST/DB (shared
    /// by replicas; verified TLS to any host other than this machine, sslmode and
    /// sslrootcert in the URL).
    #[arg(long, value_name = "STORE")]
    oauth_store: Option<String>,

    /// Allow sslmode=prefer or disable in a postgres:// --oauth-store on another
    /// host: only where the network to the database is trusted.
    #[arg(long)]
    oauth_store_allow_plaintext: bool,

    /// Connections kept to a PostgreSQL --oauth-store.
    #[arg(long, value_name = "N", default_value = "4", value_parser = clap::value_parser!(u64).range(1..=256))]
    oauth_store_connections: u64,

    /// Seconds an access token lives.
    #[arg(long, value_name = "SECONDS", default_value = "3600", value_parser = positive_seconds, allow_hyphen_values = true)]
    access_token_ttl: Duration,

    /// Seconds a grant lives without being refreshed (each refresh renews it; default 30
    /// days, at most a year).
    #[arg(long, value_name = "SECONDS", default_value = "2592000", value_parser = grant_lifetime, allow_hyphen_values = true)]
    refresh_token_ttl: Duration,

    /// The request header an authenticating proxy in front sets to the signed-in user
    /// (believed only from --trusted-proxy addresses), e.g. X-Forwarded-User.
    #[arg(long, value_name = "HEADER")]
    trusted_user_header: Option<String>,

    /// The request header the same proxy sets to the user's groups, one comma-separated
    /// list (e.g. X-Forwarded-Groups); kept with the grant for the policy's
    /// principal.groups. Needs --trusted-user-header.
    #[arg(long, value_name = "HEADER")]
    trusted_groups_header: Option<String>,

    /// The most groups one user may bring (--trusted-groups-header, --login-groups-claim);
    /// a sign-in with more is refused, never cut short.
    #[arg(long, value_name = "N", default_value = "64", value_parser = clap::value_parser!(u64).range(1..=1000))]
    max_user_groups: u64,

    /// Sign everyone in as this user (local testing only: a warning says so).
    #[arg(long, value_name = "NAME")]
    dev_user: Option<String>,

    /// An https redirect URI clients may register (loopback http ones always may).
    /// Repeatable.
    #[arg(long, value_name = "URL")]
    allow_redirect_uri: Vec<String>,

    /// A Client ID Metadata Document URL (https, with a path) whose client may sign in
    /// without registering; the document is fetched from public addresses only.
    /// Repeatable.
    #[arg(long, value_name = "URL")]
    allow_client_id_url: Vec<String>,

    /// Sign users in at this OpenID provider (its issuer URL), as a client whose id and
    /// secret are in MCP_STDIO_LOGIN_CLIENT_ID and MCP_STDIO_LOGIN_CLIENT_SECRET; register
    /// PUBLIC_ORIGIN/login-callback as its redirect URI there.
    #[arg(long, value_name = "ISSUER")]
    login_oidc: Option<String>,

    /// The id_token claim that names the user (with --login-oidc): sub (the provider's
    /// stable subject), oid (Microsoft Entra's), or email (only when the provider says
    /// email_verified is true). Another claim needs --principal-claim-verified.
    #[arg(long, value_name = "CLAIM", default_value = "sub")]
    principal_claim: String,

    /// The identity provider verifies the --principal-claim value and users cannot change
    /// it: needed to name users by a claim other than sub, oid or email (e.g. upn).
    #[arg(long)]
    principal_claim_verified: bool,

    /// Only this user may sign in (--login-oidc; the --principal-claim value). Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_user: Vec<String>,

    /// The id_token claim that lists the user's groups (with --login-oidc), e.g. groups
    /// or roles: kept with the grant for the policy's principal.groups. Off by default.
    #[arg(long, value_name = "CLAIM")]
    login_groups_claim: Option<String>,

    /// Only users whose verified email is in this domain may sign in (--login-oidc).
    /// Repeatable.
    #[arg(long, value_name = "DOMAIN")]
    allow_domain: Vec<String>,

    /// No longer used: a sign-in waiting at the identity provider is sealed into its
    /// state, not kept here, so there is nothing to bound. Accepted so that existing
    /// command lines still start.
    #[arg(long, value_name = "N", hide = true)]
    login_max_pending: Option<u64>,

    /// Most registered clients; the oldest one without a live grant makes room for a new
    /// one, and when every client is in use a registration is refused (503).
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    oauth_max_clients: u64,

    /// Most live grants (signed-in client and user pairs); the one expiring soonest is
    /// revoked past this.
    #[arg(long, value_name = "N", default_value = "10000", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    oauth_max_grants: u64,

    /// Most codes issued and not yet redeemed; a new sign-in waits past this.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    oauth_max_pending_codes: u64,

    /// Largest body the authorization server's endpoints read, in bytes.
    #[arg(long, value_name = "BYTES", default_value = "16384", value_parser = clap::value_parser!(u64).range(1024..=1_048_576))]
    oauth_max_form_size: u64,

    /// Seconds an access token, once found live in the store, is believed without asking
    /// again: how long a revocation made on another replica may take to hold here (0: ask
    /// the store on every request).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = super::non_negative_seconds, allow_hyphen_values = true)]
    oauth_accepted_for: Duration,
}

impl EmbeddedArgs {
    /// Whether any flag of the embedded server was given without --enable-oauth.
    fn stray(&self) -> Option<&'static str> {
        [
            (self.oauth_store.is_some(), "--oauth-store"),
            (
                self.oauth_store_allow_plaintext,
                "--oauth-store-allow-plaintext",
            ),
            (self.trusted_user_header.is_some(), "--trusted-user-header"),
            (
                self.trusted_groups_header.is_some(),
                "--trusted-groups-header",
            ),
            (self.dev_user.is_some(), "--dev-user"),
            (self.login_groups_claim.is_some(), "--login-groups-claim"),
            (!self.allow_redirect_uri.is_empty(), "--allow-redirect-uri"),
            (
                !self.allow_client_id_url.is_empty(),
                "--allow-client-id-url",
            ),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// `--enable-oauth` and its companions, checked; `None` without `--enable-oauth`.
pub fn auth_server(
    args: &EmbeddedArgs,
    trusted_proxies: bool,
    scopes: &[String],
    token_cache: usize,
    port: u16,
    host: IpAddr,
    public_url: Option<&url::Url>,
) -> Result<Option<AuthServerConfig>, String> {
    if !args.enable_oauth {
        if let Some(flag) = args.stray() {
            return Err(format!(
                "{flag} belongs to the embedded authorization server: add --enable-oauth"
            ));
        }
        return Ok(None);
    }
    let store = store_location(args, port)?;
    let flags = super::serve_users::UserFlags {
        trusted_user_header: args.trusted_user_header.as_deref(),
        trusted_groups_header: args.trusted_groups_header.as_deref(),
        dev_user: args.dev_user.as_deref(),
        max_user_groups: args.max_user_groups as usize,
    };
    let users = super::serve_users::users(&flags, trusted_proxies)?;
    let login = login(args)?;
    if login.is_some() && (users.trusted_header.is_some() || users.dev_user.is_some()) {
        return Err(
            "choose one way to know the user: --login-oidc, --trusted-user-header or --dev-user"
                .into(),
        );
    }
    if login.is_none() && args.login_groups_claim.is_some() {
        return Err(
            "--login-groups-claim names a claim of --login-oidc sign-ins: add --login-oidc ISSUER, or use --trusted-groups-header behind an authenticating proxy"
                .into(),
        );
    }
    if login.is_none() && args.principal_claim_verified {
        return Err(
            "--principal-claim-verified belongs to --login-oidc sign-ins: add --login-oidc ISSUER"
                .into(),
        );
    }
    if login.is_none() && (!args.allow_user.is_empty() || !args.allow_domain.is_empty()) {
        return Err(
            "--allow-user and --allow-domain limit --login-oidc sign-ins: add --login-oidc ISSUER"
                .into(),
        );
    }
    if users.trusted_header.is_none() && users.dev_user.is_none() && login.is_none() {
        tracing::warn!(
            "--enable-oauth without --trusted-user-header or --dev-user: nobody can sign in until one is set"
        );
    }
    let allowed_redirect_uris = https_urls(
        &args.allow_redirect_uri,
        |u| u.query().is_none(),
        "--allow-redirect-uri '{}' must be an exact https URI without query, fragment or user, e.g. https://claude.ai/api/mcp/auth_callback",
    )?;
    let allowed_client_id_urls = https_urls(
        &args.allow_client_id_url,
        |u| u.path() != "/",
        "--allow-client-id-url '{}' must be an https URL with a path, in canonical form, without fragment or user, e.g. https://app.example.com/oauth/client.json",
    )?;
    check_issuer_url(public_url, host)?;
    Ok(Some(AuthServerConfig {
        store,
        limits: Limits {
            max_clients: args.oauth_max_clients as usize,
            max_grants: args.oauth_max_grants as usize,
            max_pending_codes: args.oauth_max_pending_codes as usize,
            connections: args.oauth_store_connections as usize,
        },
        access_token_ttl: args.access_token_ttl,
        refresh_token_ttl: args.refresh_token_ttl,
        scopes: scopes.to_vec(),
        users,
        allowed_redirect_uris,
        allowed_client_id_urls,
        login,
        token_cache: if args.oauth_accepted_for.is_zero() {
            0
        } else {
            token_cache
        },
        accepted_for: args.oauth_accepted_for,
        max_form_size: args.oauth_max_form_size as usize,
        cluster_key: None,
    }))
}

/// `--oauth-store`: a SQLite file (by default one per port) or PostgreSQL, whose TLS to
/// another host is checked here.
fn store_location(args: &EmbeddedArgs, port: u16) -> Result<Location, String> {
    Ok(match args.oauth_store.as_deref() {
        Some(raw) => {
            let location = Location::parse(raw)?;
            if let Location::Postgres(url) = &location {
                crate::authserver::store::pg_tls::protection(
                    url,
                    args.oauth_store_allow_plaintext,
                )?;
            }
            location
        }
        None => Location::Sqlite(default_store(port)?),
    })
}

/// The issuer's URL: `--public-url` off loopback, and https unless it is loopback.
fn check_issuer_url(public_url: Option<&url::Url>, host: IpAddr) -> Result<(), String> {
    if public_url.is_none() {
        if !host.is_loopback() {
            return Err("--enable-oauth on a non-loopback address needs --public-url (the issuer must not come from a Host header anyone can send), e.g. --public-url https://mcp.example.com/mcp".into());
        }
        tracing::warn!(
            "--enable-oauth without --public-url: the issuer is taken from each request's Host header"
        );
    }
    if let Some(url) = public_url
        && url.scheme() != "https"
        && !url.host_str().is_some_and(is_loopback_name)
    {
        return Err(format!(
            "--public-url '{url}' must be https for --enable-oauth (tokens and codes travel over it), unless it is a loopback address"
        ));
    }
    Ok(())
}

/// `--login-oidc` and its companions, checked.
fn login(args: &EmbeddedArgs) -> Result<Option<LoginConfig>, String> {
    let Some(raw) = args.login_oidc.as_deref() else {
        return Ok(None);
    };
    let issuer = crate::oauth::wellknown::checked(raw, "--login-oidc").map_err(|e| {
        format!("{e}; give the provider's issuer URL, e.g. https://login.example.com/realms/team")
    })?;
    if args.login_max_pending.is_some() {
        tracing::warn!(
            "--login-max-pending is no longer needed and is ignored: a sign-in waiting at the identity provider is sealed into its state, not kept here"
        );
    }
    let claim = args.principal_claim.trim();
    if claim.is_empty() || !claim.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--principal-claim '{claim}' is not a claim name, e.g. sub or email"
        ));
    }
    if crate::authserver::login::claims::principal_kind(claim)
        == crate::authserver::login::claims::PrincipalKind::Unverifiable
        && !args.principal_claim_verified
    {
        return Err(format!(
            "--principal-claim {claim} would name users by a claim the provider may let them set (to a colleague's name, say), with nothing saying it was checked: use sub (the default; oid on Microsoft Entra), or email (believed only with email_verified true); if your provider verifies {claim} and users cannot change it, add --principal-claim-verified"
        ));
    }
    let (client_id, client_secret) = client_from_env(
        "MCP_STDIO_LOGIN_CLIENT_ID",
        "MCP_STDIO_LOGIN_CLIENT_SECRET",
        "--login-oidc needs this server's client at the provider",
    )?;
    if let Some(bad) = args
        .allow_domain
        .iter()
        .find(|d| d.is_empty() || d.contains(['@', '/', ' ']))
    {
        return Err(format!(
            "--allow-domain '{bad}' is not a domain, e.g. example.com"
        ));
    }
    Ok(Some(LoginConfig {
        issuer,
        client_id,
        client_secret,
        principal_claim: claim.to_owned(),
        principal_claim_verified: args.principal_claim_verified,
        allowed_users: args.allow_user.clone(),
        allowed_domains: args.allow_domain.clone(),
        groups_claim: login_groups_claim(args)?,
        max_groups: args.max_user_groups as usize,
        http: authorization_server_http(),
    }))
}

/// `--login-groups-claim`, checked to be a claim name.
fn login_groups_claim(args: &EmbeddedArgs) -> Result<Option<String>, String> {
    match args.login_groups_claim.as_deref().map(str::trim) {
        None => Ok(None),
        Some(claim) if !claim.is_empty() && claim.bytes().all(|b| b.is_ascii_graphic()) => {
            Ok(Some(claim.to_owned()))
        }
        Some(claim) => Err(format!(
            "--login-groups-claim '{claim}' is not a claim name, e.g. groups or roles"
        )),
    }
}

/// A client id and secret from the environment (never flags: `ps` shows those); `needs`
/// starts the error that names the variables.
pub(super) fn client_from_env(
    id_var: &str,
    secret_var: &str,
    needs: &str,
) -> Result<(String, crate::secret::Secret), String> {
    let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    match (from_env(id_var), from_env(secret_var)) {
        (Some(id), Some(secret)) => Ok((id, crate::secret::Secret::new(secret))),
        _ => Err(format!("{needs}: set {id_var} and {secret_var}")),
    }
}

/// How serve talks to an authorization server or identity provider.
pub(super) fn authorization_server_http() -> crate::http::client::ClientOptions {
    crate::http::client::ClientOptions {
        connect_timeout: Duration::from_secs(10),
        read_timeout: Some(Duration::from_secs(30)),
        extra_roots: Vec::new(),
    }
}

/// Each of `raws` as an https URL with a host, no fragment or user, written canonically,
/// and passing `also`; `problem` (with `{}` for the value) otherwise.
fn https_urls(
    raws: &[String],
    also: impl Fn(&url::Url) -> bool,
    problem: &str,
) -> Result<Vec<url::Url>, String> {
    raws.iter()
        .map(|raw| {
            url::Url::parse(raw)
                .ok()
                .filter(|u| {
                    u.scheme() == "https"
                        && u.host_str().is_some()
                        && u.fragment().is_none()
                        && u.username().is_empty()
                        && u.password().is_none()
                        && u.as_str() == raw
                        && also(u)
                })
                .ok_or_else(|| problem.replacen("{}", raw, 1))
        })
        .collect()
}

/// Whole seconds from 60 to a year.
fn grant_lifetime(value: &str) -> Result<Duration, String> {
    match value.trim().parse::<u64>() {
        Ok(s) if (60..=31_536_000).contains(&s) => Ok(Duration::from_secs(s)),
        _ => Err(format!(
            "'{value}' is not a whole number of seconds from 60 to 31536000 (a year), e.g. 2592000 (30 days)"
        )),
    }
}

fn is_loopback_name(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `$XDG_STATE_HOME/mcp-stdio/serve-oauth-PORT.db` (else under `~/.local/state`): one
/// file per port, so two servers on one machine keep their grants apart.
fn default_store(port: u16) -> Result<PathBuf, String> {
    let tokens =
        crate::oauth::store::file::FileStore::default_path(|name| std::env::var(name).ok())
            .map_err(|e| format!("{e}; or give --oauth-store sqlite:PATH"))?;
    Ok(tokens.with_file_name(format!("serve-oauth-{port}.db")))
}
