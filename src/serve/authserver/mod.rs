//! The embedded OAuth 2.1 authorization server (`--enable-oauth`): metadata (RFC 8414),
//! dynamic client registration (RFC 7591), the authorization endpoint with a consent
//! page, the token endpoint (code + PKCE S256, refresh rotation with replay detection)
//! and revocation (RFC 7009). Tokens are opaque 256-bit random strings; the store keeps
//! only their SHA-256. The front door routes requests here and asks `check_access` about
//! each MCP request's bearer.

mod authorization;
mod authorize;
mod cimd;
mod consent;
mod form;
mod issuer;
pub mod login;
mod metadata;
mod redirect;
mod register;
mod reply;
mod revoke;
pub mod store;
mod token;
pub mod users;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{HeaderMap, Method};
use url::Url;

use super::remembered::{Remembered, digest};
pub use issuer::Issuer;
pub use reply::Reply;
pub use store::Grant;

/// Access tokens start with this (secret scanners and logs can recognize them).
const ACCESS_PREFIX: &str = "mcpat_";
const REFRESH_PREFIX: &str = "mcprt_";

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

/// One of the server's endpoints, as a request names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Metadata,
    Register,
    AuthorizePage,
    AuthorizeDecision,
    Token,
    Revoke,
    /// Back from the OpenID provider (`--login-oidc`).
    LoginCallback,
}

/// What the front door knows about a request to an endpoint.
pub struct Request<'a> {
    pub headers: &'a HeaderMap,
    pub query: &'a str,
    pub body: Bytes,
    /// Whether the peer is a `--trusted-proxy` (its user header is believed).
    pub trusted_peer: bool,
    pub issuer: Issuer,
}

/// Why an access token is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessRefused {
    /// Unknown, expired or revoked.
    Unknown,
    /// Issued for another resource.
    WrongResource,
    /// The store cannot be reached.
    Unavailable,
}

/// Why a client could not be looked up.
#[derive(Debug)]
enum Lookup {
    /// The store cannot be reached (503).
    Unavailable,
    /// Its metadata document cannot be used; the reason.
    Refused(String),
}

impl Lookup {
    fn describe(&self) -> String {
        match self {
            Lookup::Unavailable => {
                "the authorization server cannot reach its store; try again shortly".into()
            }
            Lookup::Refused(why) => why.clone(),
        }
    }

    /// The token and revocation endpoints' answer.
    fn reply(&self) -> Reply {
        match self {
            Lookup::Unavailable => reply::error(
                http::StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                &self.describe(),
            ),
            Lookup::Refused(why) => {
                reply::error(http::StatusCode::UNAUTHORIZED, "invalid_client", why)
            }
        }
    }
}

pub struct AuthServer {
    pub config: AuthServerConfig,
    store: store::Store,
    csrf: consent::Csrf,
    accepted: Remembered<std::sync::Arc<Grant>>,
    documents: cimd::Documents,
    login: Option<login::OidcLogin>,
}

/// A body over `--oauth-max-form-size`.
pub fn too_large(max: usize) -> Reply {
    reply::error(
        http::StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request",
        &format!("the request body is over {max} bytes (--oauth-max-form-size)"),
    )
}

/// A fresh 256-bit random value, base64url (43 characters).
pub fn random_token() -> String {
    crate::oauth::pkce::random_token(32).expose().to_owned()
}

/// What the store keeps of a token or code: its SHA-256, base64url.
pub fn hash_token(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest(token))
}

impl AuthServer {
    /// Opens the store (migrating it) and starts serving.
    pub async fn open(config: AuthServerConfig) -> Result<Self, String> {
        let store = store::Store::open(&config.store, config.limits)
            .await
            .map_err(|e| format!("cannot open --oauth-store {}: {e}", config.store.describe()))?;
        let documents =
            cimd::Documents::new(&config.allowed_client_id_urls, cimd::Policy::strict())?;
        // A document client taken off the allowlist loses its grants and codes.
        let ended = store
            .end_document_clients_except(documents.urls().map(str::to_owned).collect())
            .await
            .map_err(|e| format!("cannot update --oauth-store: {e}"))?;
        if ended > 0 {
            tracing::info!(
                clients = ended,
                "clients no longer in --allow-client-id-url lost their grants"
            );
        }
        let sealer = config
            .cluster_key
            .as_ref()
            .map(|key| key.sealer("login-state"));
        let csrf = consent::Csrf::new(config.cluster_key.as_deref());
        Ok(AuthServer {
            login: config
                .login
                .clone()
                .map(|login| login::OidcLogin::new(login, sealer)),
            documents,
            accepted: Remembered::new(config.token_cache),
            config,
            store,
            csrf,
        })
    }

    /// The endpoint `method` and `path` name, if any.
    pub fn endpoint(&self, method: &Method, path: &str, issuer: &Issuer) -> Option<Endpoint> {
        const METADATA: [&str; 2] = [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ];
        if *method == Method::GET
            && METADATA
                .iter()
                .any(|m| path.starts_with(m) || path.ends_with(m))
        {
            return Some(Endpoint::Metadata);
        }
        match (method, issuer.local_endpoint(path)?) {
            (&Method::POST, "register") => Some(Endpoint::Register),
            (&Method::GET, "authorize") => Some(Endpoint::AuthorizePage),
            (&Method::POST, "authorize") => Some(Endpoint::AuthorizeDecision),
            (&Method::POST, "token") => Some(Endpoint::Token),
            (&Method::POST, "revoke") => Some(Endpoint::Revoke),
            (&Method::GET, "login-callback") if self.login.is_some() => {
                Some(Endpoint::LoginCallback)
            }
            _ => None,
        }
    }

    pub async fn serve(&self, endpoint: Endpoint, request: Request<'_>) -> Reply {
        let cx = authorize::Context {
            headers: request.headers,
            trusted_peer: request.trusted_peer,
            issuer: &request.issuer,
        };
        match endpoint {
            Endpoint::Metadata => metadata::document(self, &request.issuer),
            Endpoint::Register => register::register(self, &request.body).await,
            Endpoint::AuthorizePage => authorize::show(self, request.query.as_bytes(), &cx).await,
            Endpoint::AuthorizeDecision => authorize::decide(self, &request.body, &cx).await,
            Endpoint::Token => token::token(self, request.headers, &request.body).await,
            Endpoint::Revoke => revoke::revoke(self, &request.body).await,
            Endpoint::LoginCallback => {
                authorize::after_login(self, request.query.as_bytes(), &cx).await
            }
        }
    }

    /// The grant behind an MCP request's access token, if it is live and for `resource`.
    pub async fn check_access(
        &self,
        token: &str,
        resource: &str,
    ) -> Result<std::sync::Arc<Grant>, AccessRefused> {
        let key = digest(token);
        let grant = match self.accepted.get(&key) {
            Some(grant) => grant,
            None => {
                if !token.starts_with(ACCESS_PREFIX) {
                    return Err(AccessRefused::Unknown);
                }
                tracing::debug!("an access token not in memory was looked up in the store");
                let found = self.store.access(hash_token(token)).await.map_err(|e| {
                    tracing::error!("the authorization server's store failed: {e}");
                    AccessRefused::Unavailable
                })?;
                let (grant, expires_at) = found.ok_or(AccessRefused::Unknown)?;
                let grant = std::sync::Arc::new(grant);
                let remaining = Duration::from_secs((expires_at - store::now()).max(0) as u64);
                self.accepted
                    .insert(key, grant.clone(), remaining.min(self.config.accepted_for));
                grant
            }
        };
        // The grant's resource was written the way `resource` is made: equal strings are the
        // common case, and only a difference is worth parsing both.
        if !grant.resource.is_empty()
            && grant.resource != resource
            && !issuer::same_resource(&grant.resource, resource)
        {
            return Err(AccessRefused::WrongResource);
        }
        Ok(grant)
    }

    /// Deletes what can no longer matter, once a minute, until `closing` fires.
    pub async fn keep_house(&self, closing: tokio_util::sync::CancellationToken) {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = closing.cancelled() => return,
                _ = every.tick() => {
                    if let Err(e) = self.store.collect_garbage().await {
                        tracing::warn!("the authorization server's housekeeping failed: {e}");
                    }
                }
            }
        }
    }

    /// The scopes an authorization request gets: those it asks for that are offered, or
    /// every offered one when it asks for none of them.
    fn grantable_scope(&self, requested: Option<&str>) -> String {
        let offered = &self.config.scopes;
        let asked: Vec<&str> = requested
            .unwrap_or("")
            .split(' ')
            .filter(|s| offered.iter().any(|o| o == s))
            .collect();
        if asked.is_empty() {
            offered.join(" ")
        } else {
            asked.join(" ")
        }
    }

    async fn client(&self, client_id: &str) -> Result<Option<register::ClientRecord>, Lookup> {
        if self.documents.covers(client_id) {
            return self
                .documents
                .client(client_id)
                .await
                .map_err(Lookup::Refused);
        }
        let stored = self.store.client(client_id.to_owned()).await.map_err(|e| {
            tracing::error!("the authorization server's store failed: {e}");
            Lookup::Unavailable
        })?;
        Ok(stored.and_then(|json| serde_json::from_str(&json).ok()))
    }

    /// A new access and refresh token pair: their hashes for the store, the values for
    /// the client.
    fn new_tokens(&self) -> (store::Issue, String, String) {
        let access = format!("{ACCESS_PREFIX}{}", random_token());
        let refresh = format!("{REFRESH_PREFIX}{}", random_token());
        let now = store::now();
        let issue = store::Issue {
            access_hash: hash_token(&access),
            access_expires_at: now + self.config.access_token_ttl.as_secs() as i64,
            refresh_hash: hash_token(&refresh),
            refresh_expires_at: now + self.config.refresh_token_ttl.as_secs() as i64,
        };
        (issue, access, refresh)
    }

    /// Grants were revoked here: their tokens are no longer believed from memory. Every
    /// other accepted token stays remembered.
    fn forget_grants(&self, grant_ids: &[String]) {
        if !grant_ids.is_empty() {
            self.accepted
                .forget_where(|grant| grant_ids.contains(&grant.grant_id));
        }
    }

    /// An access token was revoked here.
    fn forget_token(&self, token: &str) {
        self.accepted.forget(&digest(token));
    }
}
