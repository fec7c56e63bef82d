//! The authorization server's state (`AuthServer`: its store, consent forms, accepted
//! tokens, metadata documents and upstream sign-in) and what the endpoints and the gateway
//! ask of it: client lookup, token issue, the access check and housekeeping.

use std::time::Duration;

use super::cimd;
use super::client::ClientRecord;
use super::config::AuthServerConfig;
use super::consent;
use super::issuer;
use super::login;
use super::opaque::{ACCESS_PREFIX, REFRESH_PREFIX, hash_token, random_token};
use super::reply::{self, Reply};
use super::store::{self, Grant};
use crate::remembered::{Remembered, digest};

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
pub(super) enum Lookup {
    /// The store cannot be reached (503).
    Unavailable,
    /// Its metadata document cannot be used; the reason.
    Refused(String),
}

impl Lookup {
    pub(super) fn describe(&self) -> String {
        match self {
            Lookup::Unavailable => {
                "the authorization server cannot reach its store; try again shortly".into()
            }
            Lookup::Refused(why) => why.clone(),
        }
    }

    /// The token and revocation endpoints' answer.
    pub(super) fn reply(&self) -> Reply {
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
    pub(super) store: store::Store,
    pub(super) csrf: consent::Csrf,
    accepted: Remembered<std::sync::Arc<Grant>>,
    pub(super) documents: cimd::Documents,
    pub(super) login: Option<login::OidcLogin>,
    /// Under `serve --config`: the paths of the listener's endpoints this server issues
    /// tokens for (every server of the file without an `auth` of its own, and the
    /// aggregate endpoints); `None` for one served server.
    listener_paths: std::sync::RwLock<Option<Vec<String>>>,
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
            listener_paths: std::sync::RwLock::new(None),
        })
    }

    /// Makes this the authorization server of every endpoint at `paths` (`serve --config`:
    /// called again when a reload adds or removes a server).
    pub fn serve_paths(&self, paths: Vec<String>) {
        *self.listener_paths.write().expect("paths lock") = Some(paths);
    }

    /// The resource (RFC 8707) an authorization request for `asked` is granted for:
    /// one served server's own endpoint, or under `serve --config` any endpoint of the
    /// listener (and, when the client names none, every one of them: an empty resource).
    pub(super) fn resource_for(
        &self,
        asked: Option<&str>,
        issuer: &issuer::Issuer,
    ) -> Result<String, String> {
        let ours = issuer.resource();
        let listener = self.listener_paths.read().expect("paths lock");
        let Some(paths) = listener.as_ref() else {
            return match asked {
                Some(asked) if !issuer::same_resource(asked, &ours) => Err(format!(
                    "this server issues tokens only for {ours}, not {asked}"
                )),
                _ => Ok(ours),
            };
        };
        // Naming none (or the marker itself, as the consent form sends it back): every
        // endpoint of this listener, at this origin.
        let every = issuer.resource_at(issuer::EVERY_ENDPOINT);
        let asked = match asked {
            None => return Ok(every),
            Some(asked) if asked == every => return Ok(every),
            Some(asked) => asked,
        };
        let resources: Vec<String> = paths.iter().map(|p| issuer.resource_at(p)).collect();
        resources
            .iter()
            .find(|r| issuer::same_resource(asked, r))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "this server issues tokens only for {}, not {asked}",
                    resources.join(", ")
                )
            })
    }

    /// Whether a grant for every endpoint of a `serve --config` listener (`granted` ends
    /// in `/*`) covers `resource`: one of the listener's endpoints now, at the same origin.
    fn listener_covers(&self, granted: &str, resource: &str) -> bool {
        let Some(base) = issuer::every_endpoint_base(granted) else {
            return false;
        };
        let listener = self.listener_paths.read().expect("paths lock");
        listener.as_ref().is_some_and(|paths| {
            paths
                .iter()
                .any(|path| issuer::same_resource(resource, &format!("{base}{path}")))
        })
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
            && !self.listener_covers(&grant.resource, resource)
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
    pub(super) fn grantable_scope(&self, requested: Option<&str>) -> String {
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

    pub(super) async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, Lookup> {
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
    pub(super) fn new_tokens(&self) -> (store::Issue, String, String) {
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
    pub(super) fn forget_grants(&self, grant_ids: &[String]) {
        if !grant_ids.is_empty() {
            self.accepted
                .forget_where(|grant| grant_ids.contains(&grant.grant_id));
        }
    }

    /// An access token was revoked here.
    pub(super) fn forget_token(&self, token: &str) {
        self.accepted.forget(&digest(token));
    }
}
