//! `AuthServerConfig`: what `--enable-oauth` and its companions configure.

use std::time::Duration;

use url::Url;

use super::login;
use super::store;
use super::users;

/// `--enable-oauth` and what goes with it.
#[derive(Debug, Clone)]
pub struct AuthServerConfig {
    pub store: store::Location,
    pub limits: store::Limits,
    /// `--access-token-ttl`.
    pub access_token_ttl: Duration,
    /// `--refresh-token-ttl`: how long a grant lives without being refreshed.
    pub refresh_token_ttl: Duration,
    /// `--oauth-scope`: offered, granted by default, and required of every token.
    pub scopes: Vec<String>,
    pub users: users::Users,
    /// `--allow-redirect-uri`: https redirect URIs clients may register.
    pub allowed_redirect_uris: Vec<Url>,
    /// `--allow-client-id-url`: clients described by a metadata document at their id.
    pub allowed_client_id_urls: Vec<Url>,
    /// `--login-oidc`: users sign in at this OpenID provider.
    pub login: Option<login::LoginConfig>,
    /// `--oauth-token-cache`: accepted tokens remembered; 0 asks the store every time.
    pub token_cache: usize,
    /// `--oauth-max-form-size`: the largest body the endpoints read.
    pub max_form_size: usize,
    /// `--oauth-accepted-for`: how long an access token found live is believed.
    pub accepted_for: Duration,
    /// Among replicas: consent forms and pending sign-ins are sealed with it, so any
    /// replica takes what another one handed out.
    pub cluster_key: Option<std::sync::Arc<crate::cluster_key::ClusterKey>>,
}
