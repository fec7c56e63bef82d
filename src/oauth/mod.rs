//! The OAuth 2.1 client of the relay and of `login` / `logout` / `status` / `token`
//! (MCP authorization, `docs/oauth.md`): challenges and discovery (RFC 9728, RFC 8414,
//! OIDC), client identity (pre-registered, Client ID Metadata Documents, Dynamic Client
//! Registration), the browser flow with PKCE and a loopback callback, the device flow,
//! client credentials and `private_key_jwt`, token answers and refresh, revocation, the
//! relay's token provider, and the token stores (OS keyring, private file, the Python
//! tool's file imported, a cross-process lock).

pub mod authorize;
pub mod binding;
mod browser_flow;
pub mod callback;
pub mod challenge;
mod client_credentials;
pub mod device;
mod device_flow;
pub mod discovery;
pub mod dpop;
pub mod enterprise;
pub mod flow;
pub mod http;
pub mod idp;
mod idp_login;
pub mod jwt;
pub mod jwt_bearer;
pub mod metadata;
pub mod pkce;
pub mod presented;
pub mod provider;
pub mod registration;
pub mod revoke;
pub mod store;
pub mod token;
mod token_request;
pub mod wellknown;

/// How logins are made and where they are kept: what the relay needs to use OAuth for its
/// server, and what `login` and `token` need for theirs.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    pub settings: flow::Settings,
    /// `--oauth`: a browser login may start when no usable grant exists.
    pub interactive: bool,
    /// Where the grants are kept.
    pub store: store::StoreConfig,
}

impl OAuthConfig {
    /// One server's login state, over an OAuth HTTP client with these settings.
    pub fn server_auth(
        &self,
        client: crate::http::client::ClientOptions,
        max_body: usize,
        server: url::Url,
    ) -> Result<flow::ServerAuth, String> {
        Ok(flow::ServerAuth {
            http: http::OAuthHttp::new(client, max_body),
            store: self.store.open()?,
            server,
            settings: self.settings.clone(),
            as_nonce: std::sync::Mutex::new(None),
            refused_assertion: std::sync::Mutex::new(None),
        })
    }
}
