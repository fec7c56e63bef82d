//! The OAuth 2.1 client of the relay (MCP authorization, `docs/oauth.md`).
//!
//! Built so far: reading `WWW-Authenticate` challenges, the metadata locations and the URL
//! rules, metadata checks (issuer, PKCE S256, https endpoints), discovery over HTTP that
//! never follows a redirect, the token file (private, atomic, symlink-proof), PKCE and
//! `state`, the authorization URL and the callback checks (state, RFC 9207 `iss`), and
//! token answers (dead vs passing failures, refresh-token retention). Not yet: client
//! registration, the loopback callback server, the browser and device flows, using and
//! refreshing tokens in the relay, the keyring backend, the cross-process lock, and the
//! `login` / `logout` / `status` / `token` commands.

pub mod authorize;
pub mod callback;
pub mod challenge;
mod client_credentials;
pub mod device;
mod device_flow;
pub mod discovery;
pub mod flow;
pub mod http;
pub mod jwt;
pub mod metadata;
pub mod pkce;
pub mod provider;
pub mod registration;
pub mod revoke;
pub mod secret;
pub mod store;
pub mod token;
pub mod wellknown;

/// What the relay needs to use OAuth for its server.
#[derive(Debug, Clone)]
pub struct RelayOAuth {
    pub settings: flow::Settings,
    /// `--oauth`: a browser login may start when no usable grant exists.
    pub interactive: bool,
    pub token_file: std::path::PathBuf,
    /// `--token-store`.
    pub token_store: store::backend::Choice,
    /// `--keyring-timeout`: how long one OS keyring call may take.
    pub keyring_timeout: std::time::Duration,
    /// The Python mcp-stdio's token file, imported on first use.
    pub python_tokens: Option<std::path::PathBuf>,
}
