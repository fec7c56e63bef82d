//! The OAuth flags shared by `relay` and `login`, and their validation into settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use url::Url;

use super::{non_negative_seconds, positive_seconds};
use crate::oauth::dpop::DpopMode;
use crate::oauth::flow::{Resource, Settings};
use crate::oauth::idp::IdpSettings;
use crate::oauth::jwt::ClientKey;
use crate::oauth::store::backend::Choice;
use crate::oauth::store::file::FileStore;
use crate::secret::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TokenStoreChoice {
    /// The OS keyring when one is usable, else the file.
    Auto,
    /// The OS keyring (Secret Service, macOS Keychain, Windows Credential Manager) or fail.
    Keyring,
    /// The 0600 token file.
    File,
}

impl From<TokenStoreChoice> for Choice {
    fn from(choice: TokenStoreChoice) -> Choice {
        match choice {
            TokenStoreChoice::Auto => Choice::Auto,
            TokenStoreChoice::Keyring => Choice::Keyring,
            TokenStoreChoice::File => Choice::File,
        }
    }
}

/// Where tokens are kept: shared by the relay and every token command.
#[derive(Debug, Clone, Copy, Args)]
pub struct StoreArgs {
    /// Where tokens are kept.
    #[arg(long, value_enum, default_value = "auto")]
    pub token_store: TokenStoreChoice,

    /// Seconds one OS keyring call may take (a locked keyring may wait for a prompt);
    /// after that `auto` uses the file and `keyring` fails.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub keyring_timeout: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct OAuthArgs {
    /// A client registered in advance at the authorization server (skips registration).
    #[arg(long, env = "MCP_OAUTH_CLIENT_ID", value_name = "ID")]
    pub client_id: Option<String>,

    /// A Client ID Metadata Document (an https URL with a path) to use as the client id
    /// where the authorization server supports it, instead of registering.
    #[arg(long, value_name = "URL", conflicts_with = "client_id")]
    pub client_metadata_url: Option<String>,

    /// Log in as the client itself (client credentials grant), with --client-id and
    /// --client-secret or --client-key; no user, no browser.
    #[arg(long)]
    pub client_credentials: bool,

    /// The client's P-256 private key (PKCS#8 PEM) for `private_key_jwt` authentication.
    #[arg(long, value_name = "FILE")]
    pub client_key: Option<std::path::PathBuf>,

    /// That client's secret (prefer the environment variable: flags show in `ps`).
    #[arg(
        long,
        env = "MCP_OAUTH_CLIENT_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub client_secret: Option<String>,

    /// Scopes to request, space-separated (default: what the server's challenge or
    /// metadata asks for).
    #[arg(long, value_name = "SCOPES")]
    pub oauth_scope: Option<String>,

    /// The RFC 8707 resource to request tokens for (default: the server URL).
    #[arg(long, value_name = "URI", conflicts_with = "no_resource_indicator")]
    pub oauth_resource: Option<String>,

    /// Send no RFC 8707 resource (for authorization servers that reject it).
    #[arg(long)]
    pub no_resource_indicator: bool,

    /// Refresh the access token this many seconds before it expires.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    pub oauth_refresh_leeway: Duration,

    /// Log in as a workload (SEP-1933): the JWT in FILE (a Kubernetes service-account
    /// token, a CI job's OIDC token), read again at every token request, traded with the
    /// JWT bearer grant; no client secret, no browser.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["client_credentials", "oauth_device", "idp_issuer", "client_secret", "client_key", "client_metadata_url"])]
    pub workload_token_file: Option<PathBuf>,

    /// The largest --workload-token-file or --idp-id-token-file read, in bytes (a JWT is
    /// a few kilobytes).
    #[arg(long, value_name = "BYTES", default_value = "65536", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_credential_file: u64,

    /// Enterprise-managed authorization (SEP-990): your organisation's identity provider,
    /// whose ID token is exchanged there for an ID-JAG the MCP server's authorization
    /// server accepts (no consent screen per server). Needs --idp-client-id and --client-id.
    #[arg(long, value_name = "URL", conflicts_with_all = ["client_credentials", "oauth_device"])]
    pub idp_issuer: Option<String>,

    /// Our client at the identity provider (--idp-issuer).
    #[arg(long, value_name = "ID", requires = "idp_issuer")]
    pub idp_client_id: Option<String>,

    /// That client's secret at the identity provider, if it has one.
    #[arg(
        long,
        env = "MCP_IDP_CLIENT_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub idp_client_secret: Option<String>,

    /// An ID token from the identity provider obtained elsewhere (read at each login)
    /// instead of a browser login there.
    #[arg(long, value_name = "FILE", requires = "idp_issuer")]
    pub idp_id_token_file: Option<PathBuf>,

    /// Bind tokens to a key with DPoP (RFC 9449): `auto` when the authorization server
    /// or the MCP server asks for it, `always`, or `never`.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub dpop: DpopMode,

    /// Seconds to wait for the browser login to complete.
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub oauth_timeout: Duration,

    /// Log in with the device flow (RFC 8628): a code and a URL to open on any other
    /// device. For machines without a browser. Implies --oauth.
    #[arg(long, conflicts_with = "callback_port")]
    pub oauth_device: bool,

    /// Print the login URL instead of opening a browser.
    #[arg(long)]
    pub no_browser: bool,

    /// Fixed port for the login callback on 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub callback_port: Option<u16>,

    #[command(flatten)]
    pub store: StoreArgs,
}

impl OAuthArgs {
    pub fn settings(&self) -> Result<Settings, String> {
        if self.client_credentials && self.client_id.is_none() {
            return Err(
                "--client-credentials needs --client-id (and --client-secret or --client-key)"
                    .into(),
            );
        }
        if self.client_key.is_some() && self.client_id.is_none() {
            return Err("--client-key needs --client-id: the key belongs to a client".into());
        }
        if self.client_secret.is_some() && self.client_id.is_none() {
            return Err(
                "--client-secret / MCP_OAUTH_CLIENT_SECRET needs --client-id / MCP_OAUTH_CLIENT_ID: a secret belongs to a client"
                    .into(),
            );
        }
        let resource = match (&self.oauth_resource, self.no_resource_indicator) {
            (Some(_), true) => {
                return Err(
                    "--oauth-resource and --no-resource-indicator contradict each other; keep one"
                        .into(),
                );
            }
            (Some(raw), false) => {
                let url = Url::parse(raw).map_err(|e| {
                    format!("--oauth-resource '{raw}' is not an absolute URI ({e}); e.g. https://example.com/mcp")
                })?;
                if url.fragment().is_some() {
                    return Err(format!(
                        "--oauth-resource '{raw}' has a #fragment, which RFC 8707 forbids"
                    ));
                }
                Resource::Custom(raw.clone())
            }
            (None, true) => Resource::Omitted,
            (None, false) => Resource::Server,
        };
        Ok(Settings {
            client_id: self.client_id.clone().filter(|c| !c.is_empty()),
            client_secret: self.client_secret.clone().map(Secret::new),
            scope: self.oauth_scope.clone().filter(|s| !s.trim().is_empty()),
            resource,
            refresh_leeway: self.oauth_refresh_leeway,
            timeout: self.oauth_timeout,
            open_browser: !self.no_browser,
            callback_port: self.callback_port,
            device: self.oauth_device,
            client_metadata_url: self
                .client_metadata_url
                .as_deref()
                .map(client_metadata_url)
                .transpose()?,
            client_credentials: self.client_credentials,
            client_key: self
                .client_key
                .as_ref()
                .map(|path| {
                    let pem = std::fs::read(path).map_err(|e| {
                        format!("--client-key: cannot read {}: {e}", path.display())
                    })?;
                    ClientKey::from_pem(&pem).map(std::sync::Arc::new)
                })
                .transpose()?,
            dpop: self.dpop,
            workload_token_file: self.workload_token_file.clone(),
            idp: self.idp()?,
            max_credential_file: self.max_credential_file,
        })
    }

    /// The identity provider of enterprise-managed authorization, checked.
    fn idp(&self) -> Result<Option<IdpSettings>, String> {
        let Some(issuer) = &self.idp_issuer else {
            if self.idp_client_secret.is_some() {
                return Err(
                    "--idp-client-secret / MCP_IDP_CLIENT_SECRET needs --idp-issuer".into(),
                );
            }
            return Ok(None);
        };
        let url = Url::parse(issuer).map_err(|e| {
            format!("--idp-issuer '{issuer}' is not a URL ({e}); e.g. https://login.example.com")
        })?;
        if url.scheme() != "https" && !crate::oauth::wellknown::is_loopback(&url) {
            return Err(format!(
                "--idp-issuer '{issuer}' must be https (or a loopback address for testing)"
            ));
        }
        let client_id = self.idp_client_id.clone().ok_or(
            "--idp-issuer needs --idp-client-id: the client registered for mcp-stdio at the identity provider",
        )?;
        if self.client_id.is_none() {
            return Err("--idp-issuer needs --client-id (and MCP_OAUTH_CLIENT_SECRET): the client registered at the MCP server's authorization server, which takes the ID-JAG".into());
        }
        Ok(Some(IdpSettings {
            issuer: issuer.clone(),
            client_id,
            client_secret: self.idp_client_secret.clone().map(Secret::new),
            id_token_file: self.idp_id_token_file.clone(),
        }))
    }
}

/// A Client ID Metadata Document URL must be https with a path (it names the client).
fn client_metadata_url(raw: &str) -> Result<String, String> {
    let url = Url::parse(raw).map_err(|e| {
        format!("--client-metadata-url '{raw}' is not a URL ({e}); e.g. https://example.com/mcp-stdio.json")
    })?;
    if url.scheme() != "https"
        || url.path().trim_matches('/').is_empty()
        || url.fragment().is_some()
    {
        return Err(format!(
            "--client-metadata-url '{raw}' must be an https URL with a path and no #fragment, e.g. https://example.com/mcp-stdio.json"
        ));
    }
    Ok(raw.to_owned())
}

/// The token file's location.
pub fn token_file(env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    FileStore::default_path(env)
}
