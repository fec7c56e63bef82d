//! Who is calling: each request's bearer checked by the configured mode, and the principal
//! it names. Open (no check), a static `--auth-token` (one principal for everyone), or a
//! resource server for an external authorization server (`--oauth-issuer`): JWT access
//! tokens verified against its JWKS, opaque ones introspected (`--introspection-url`), the
//! principal their `sub`; or the embedded authorization server (`--enable-oauth`), whose
//! grants name the user. Every decision is one log line and one counter; no token is
//! ever logged.

pub mod claims;
mod introspect;
pub mod jwt;
mod token_kind;

pub use token_kind::KindCheck;

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::authserver::{AccessRefused, AuthServer};
use crate::secret::Secret;
pub use claims::Outcome;
pub use introspect::IntrospectionConfig;

/// `--oauth-issuer` and what goes with it.
#[derive(Debug, Clone)]
pub struct ResourceServerConfig {
    /// The authorization server's issuer identifier, exactly as its metadata publishes it.
    pub issuer: Url,
    /// What a token's `aud` must contain: this resource.
    pub audience: String,
    /// Scopes every token must carry.
    pub scopes: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// The shortest time between two JWKS fetches (an unknown `kid` refetches at most this
    /// often).
    pub refetch_interval: Duration,
    /// Accepted tokens remembered (by hash) so that a client's next request with the same
    /// token skips the signature check; 0: check every time.
    pub token_cache: usize,
    /// `--introspection-url`: where opaque tokens are checked (RFC 7662).
    pub introspection: Option<IntrospectionConfig>,
    /// How an id_token is told from an access token (`--oauth-require-at-jwt`,
    /// `--oauth-no-id-token-check`).
    pub kind_check: KindCheck,
    pub http: crate::http::client::ClientOptions,
}

/// How requests are checked.
pub enum Auth {
    Open,
    Static(Secret),
    ResourceServer(Box<jwt::Verifier>),
    Embedded(Arc<AuthServer>),
}

/// Who a request comes from.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Whom sessions and pooled children belong to.
    pub principal: String,
    /// The OAuth client, when the token names one (for the log).
    pub client_id: Option<String>,
    /// What a policy rule sees of the caller (`sub`, claims, scopes, groups); made once per
    /// token, since an accepted token is remembered with it.
    pub identity: Arc<crate::policy::Principal>,
}

impl Caller {
    /// A caller known by a name only (the static token, a replica's introduction).
    pub fn named(principal: &str) -> Self {
        Caller {
            principal: principal.to_owned(),
            client_id: None,
            identity: Arc::new(crate::policy::Principal::new(
                Some(principal.to_owned()),
                serde_json::Value::Object(Default::default()),
                Vec::new(),
                None,
                Vec::new(),
            )),
        }
    }
}

/// Why a request was refused.
#[derive(Debug)]
pub enum Refused {
    /// No bearer token at all.
    Missing,
    /// A token that is not accepted; the outcome says why (for the log and the metric).
    Invalid(Outcome),
    /// A valid token without these scopes (403 `insufficient_scope`).
    InsufficientScope(Vec<String>),
    /// The grants cannot be looked up (503: the token may well be good).
    Unavailable,
}

impl Auth {
    pub fn new(
        token: Option<Secret>,
        resource_server: Option<ResourceServerConfig>,
        embedded: Option<Arc<AuthServer>>,
    ) -> Self {
        if let Some(server) = embedded {
            return Auth::Embedded(server);
        }
        match (token, resource_server) {
            (_, Some(config)) => Auth::ResourceServer(Box::new(jwt::Verifier::new(config))),
            (Some(token), None) => Auth::Static(token),
            (None, None) => Auth::Open,
        }
    }

    pub fn is_open(&self) -> bool {
        matches!(self, Auth::Open)
    }

    /// The issuer to name in protected resource metadata, when there is one (`issuer`:
    /// the embedded server's identifier for this request).
    pub fn issuer(&self, embedded: impl FnOnce() -> String) -> Option<String> {
        match self {
            Auth::ResourceServer(verifier) => Some(verifier.issuer().to_owned()),
            Auth::Embedded(_) => Some(embedded()),
            _ => None,
        }
    }

    /// The embedded authorization server, when serve is its own.
    pub fn embedded(&self) -> Option<&Arc<AuthServer>> {
        match self {
            Auth::Embedded(server) => Some(server),
            _ => None,
        }
    }

    /// The scopes to advertise and require.
    pub fn scopes(&self) -> &[String] {
        match self {
            Auth::ResourceServer(verifier) => verifier.scopes(),
            Auth::Embedded(server) => &server.config.scopes,
            _ => &[],
        }
    }

    /// The caller the request's `Authorization` value names (`None` when open).
    /// `resource` says this endpoint as the client reached it (what an embedded grant must
    /// be for).
    pub async fn authorize(
        &self,
        authorization: Option<&str>,
        resource: impl FnOnce() -> String,
    ) -> Result<Option<Caller>, Refused> {
        let presented = authorization.and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        match self {
            Auth::Open => Ok(None),
            Auth::Static(expected) => match presented {
                Some(token) if crate::secret::matches(token, expected) => {
                    Ok(Some(Caller::named("bearer")))
                }
                Some(_) => Err(Refused::Invalid(Outcome::Unknown)),
                None => Err(Refused::Missing),
            },
            Auth::ResourceServer(verifier) => {
                let token = presented.ok_or(Refused::Missing)?;
                verifier.verify(token).await.map(Some)
            }
            Auth::Embedded(server) => {
                let token = presented.ok_or(Refused::Missing)?;
                let grant = server
                    .check_access(token, &resource())
                    .await
                    .map_err(|refused| match refused {
                        AccessRefused::Unknown => Refused::Invalid(Outcome::Unknown),
                        AccessRefused::WrongResource => Refused::Invalid(Outcome::WrongAudience),
                        AccessRefused::Unavailable => Refused::Unavailable,
                    })?;
                let held: Vec<&str> = grant.scope.split(' ').collect();
                let missing: Vec<String> = server
                    .config
                    .scopes
                    .iter()
                    .filter(|s| !held.contains(&s.as_str()))
                    .cloned()
                    .collect();
                if !missing.is_empty() {
                    return Err(Refused::InsufficientScope(server.config.scopes.clone()));
                }
                Ok(Some(Caller {
                    principal: grant.principal.clone(),
                    client_id: Some(grant.client_id.clone()),
                    identity: Arc::new(claims::embedded_identity(
                        &grant.principal,
                        &grant.client_id,
                        &grant.scope,
                        &grant.groups,
                    )),
                }))
            }
        }
    }
}

impl Refused {
    /// The label of `/metrics`' `mcp_stdio_auth_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Refused::Missing => "missing",
            Refused::Invalid(outcome) => outcome.label(),
            Refused::InsufficientScope(_) => "insufficient_scope",
            Refused::Unavailable => "store_unavailable",
        }
    }
}
