//! Logging in and refreshing: discovery, the client identity, the browser flow with PKCE
//! and a loopback callback, the code exchange, and storing the grant.

use std::time::Duration;

use serde_json::json;
use url::Url;

use super::challenge::{self, Challenge};
use super::discovery::{Discovered, discover};
use super::dpop::DpopKey;
use super::http::{Fetched, OAuthHttp};
use super::registration::{choose_auth_method, register};
use super::store::backend::TokenStore;
use super::store::lock::ServerLock;
use super::store::{Grant, Registration, grant_key};
use super::token::{Issued, TokenFailure, grant_from, refresh_form, unix_now};
use crate::secret::Secret;

/// Which RFC 8707 `resource` to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// The server URL, verbatim (the default).
    Server,
    /// `--oauth-resource`.
    Custom(String),
    /// `--no-resource-indicator`.
    Omitted,
}

/// The OAuth flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub scope: Option<String>,
    pub resource: Resource,
    pub refresh_leeway: Duration,
    pub timeout: Duration,
    pub open_browser: bool,
    pub callback_port: Option<u16>,
    /// `--oauth-device`: the device flow instead of the browser flow.
    pub device: bool,
    /// `--client-metadata-url`: our Client ID Metadata Document, used as the client id
    /// where the authorization server supports it.
    pub client_metadata_url: Option<String>,
    /// `--client-credentials`: log in as the client itself, no user.
    pub client_credentials: bool,
    /// `--client-key`: sign client assertions (`private_key_jwt`) with this key.
    pub client_key: Option<std::sync::Arc<super::jwt::ClientKey>>,
    /// `--dpop`: when logins bind their tokens to a key (RFC 9449).
    pub dpop: super::dpop::DpopMode,
    /// `--workload-token-file`: log in as a workload with the JWT in this file (SEP-1933).
    pub workload_token_file: Option<std::path::PathBuf>,
    /// `--idp-issuer` and friends: enterprise-managed authorization (SEP-990).
    pub idp: Option<super::idp::IdpSettings>,
    /// `--max-credential-file`: the largest workload token or ID token file read.
    pub max_credential_file: u64,
}

/// One server's OAuth state: where its grant is stored and how to get a new one.
pub struct ServerAuth {
    pub http: OAuthHttp,
    pub store: TokenStore,
    pub server: Url,
    pub settings: Settings,
    /// The authorization server's latest DPoP nonce (RFC 9449 §8), for the next proof.
    pub as_nonce: std::sync::Mutex<Option<String>>,
    /// The last assertion the authorization server refused (its hash) and why: it is not
    /// presented again.
    pub refused_assertion: std::sync::Mutex<Option<(String, String)>>,
}

impl ServerAuth {
    pub fn resource(&self) -> Option<String> {
        match &self.settings.resource {
            Resource::Server => Some(self.server.as_str().to_owned()),
            Resource::Custom(resource) => Some(resource.clone()),
            Resource::Omitted => None,
        }
    }

    /// The `resource` sent to the authorization server for a login: with the default
    /// (`Resource::Server`), the identifier exactly as the server's protected resource
    /// metadata publishes it (already checked to cover this server), since a URL parser
    /// would change a pathless one (RFC 9728 §3.3); otherwise as configured.
    pub fn resource_for(&self, found: &super::discovery::Discovered) -> Option<String> {
        let published = found.resource.as_ref().and_then(|prm| prm.resource.clone());
        match (&self.settings.resource, published) {
            (Resource::Server, Some(published)) => Some(published),
            _ => self.resource(),
        }
    }

    pub fn key(&self) -> String {
        grant_key(&self.server, self.resource().as_deref())
    }

    /// Serializes refreshes and logins for this server across processes. Waits as long as
    /// another process's login may take; after that, goes ahead without the lock.
    pub async fn exclusive(&self) -> Option<ServerLock> {
        self.exclusive_on(&self.key()).await
    }

    /// [`ServerAuth::exclusive`] for another login kept in the store (an identity
    /// provider's, which many servers share), named by its store key.
    pub async fn exclusive_on(&self, key: &str) -> Option<ServerLock> {
        let dir = self.store.lock_dir()?;
        let patience = self.settings.timeout + Duration::from_secs(30);
        match ServerLock::acquire(dir, key, patience).await {
            Ok(Some(lock)) => Some(lock),
            Ok(None) => {
                tracing::warn!(
                    "another process held this server's login lock too long; going ahead"
                );
                None
            }
            Err(e) => {
                tracing::warn!("{e}; going ahead without the cross-process lock");
                None
            }
        }
    }

    /// Whether `grant`'s authorization server is still one the server names. A server that
    /// moved to another authorization server makes every old grant and registration useless
    /// there (SEP-2352): the caller must log in afresh. Unknown (no metadata) counts as yes.
    pub async fn issuer_still_current(&self, grant: &Grant, challenge: Option<&Challenge>) -> bool {
        let Some(resource) =
            super::discovery::protected_resource(&self.http, &self.server, challenge).await
        else {
            return true;
        };
        let trimmed = |s: &str| s.trim_end_matches('/').to_owned();
        resource.authorization_servers.is_empty()
            || resource
                .authorization_servers
                .iter()
                .any(|issuer| trimmed(issuer) == trimmed(&grant.issuer))
    }

    /// The stored grant for this server, if any.
    pub fn stored(&self) -> Result<Option<Grant>, String> {
        Ok(self.store.load()?.grants.get(&self.key()).cloned())
    }

    /// Asks the server for its challenge: an unauthenticated `initialize` that a protected
    /// server answers with 401 and `WWW-Authenticate`.
    pub async fn probe(&self) -> Option<Challenge> {
        let body = json!({"jsonrpc": "2.0", "id": "mcp-stdio-probe", "method": "initialize",
            "params": {"protocolVersion": crate::era::LATEST_LEGACY_VERSION, "capabilities": {},
                       "clientInfo": crate::era::relay_info()}});
        let fetched = self.http.post_json(&self.server, &body).await.ok()?;
        challenge_of(&fetched)
    }

    /// Runs the browser login and stores the grant.
    pub async fn login(&self, challenge: Option<&Challenge>) -> Result<Grant, String> {
        self.login_as(challenge, true).await
    }

    /// A login that needs nobody at the keyboard (workload identity, an ID-JAG from a kept
    /// or given ID token, client credentials), or an error that says how to log in.
    pub async fn login_unattended(&self, challenge: Option<&Challenge>) -> Result<Grant, String> {
        self.login_as(challenge, false).await
    }

    /// Picks the flow this login takes and runs it; `interactive`: a browser (or the
    /// device flow) may be involved.
    async fn login_as(
        &self,
        challenge: Option<&Challenge>,
        interactive: bool,
    ) -> Result<Grant, String> {
        if interactive && self.settings.device {
            return self.login_device(challenge).await;
        }
        let found = discover(&self.http, &self.server, challenge).await?;
        let scope = self.scope(&found, challenge);
        let key = self.login_key(&found, challenge)?;
        let scope = scope.as_deref();
        if let Some(path) = &self.settings.workload_token_file {
            return self.login_workload(path, &found, scope, key).await;
        }
        if let Some(idp) = &self.settings.idp {
            return self
                .login_enterprise(idp, &found, scope, key, interactive)
                .await;
        }
        if self.uses_client_credentials(&found) {
            return self.login_client_credentials(&found, scope, key).await;
        }
        if !interactive {
            return Err(format!(
                "HTTP 401 from upstream: the server requires a user login; run `mcp-stdio login {}` in a terminal, or start the relay with --oauth",
                self.server
            ));
        }
        self.login_browser(&found, scope, key).await
    }

    /// Exchanges the grant's refresh token. On success the new grant is stored (a rotated
    /// refresh token included); a dead grant is removed from the store.
    pub async fn refresh(&self, grant: &Grant) -> Result<Grant, TokenFailure> {
        let Some(refresh_token) = grant.refresh_token.clone() else {
            return Err(TokenFailure::Dead("the grant has no refresh token".into()));
        };
        let document = self.store.load().map_err(TokenFailure::Passing)?;
        let client = document
            .registrations
            .get(&grant.issuer)
            .filter(|r| r.client_id == grant.client_id)
            .cloned()
            .unwrap_or_else(|| self.configured_client(&grant.client_id, None));
        let endpoint = Url::parse(&grant.token_endpoint).map_err(|e| {
            TokenFailure::Dead(format!("the stored token endpoint is invalid ({e})"))
        })?;
        let resource = grant.resource.clone();
        let form = refresh_form(&refresh_token, &client.client_id, resource.as_deref());
        // A bound token's refresh is proved with the same key, which keeps the binding.
        let key = grant
            .dpop_key
            .as_ref()
            .map(DpopKey::from_stored)
            .transpose()
            .map_err(TokenFailure::Dead)?;
        let outcome = self
            .token_request(&endpoint, form, &client, &grant.issuer, key.as_ref())
            .await;
        // The answer says whether the new token is still bound (a server may stop binding;
        // --dpop always refuses that as it refuses it at login).
        let outcome = outcome.and_then(|answer| {
            let binding = self
                .binding_of(&answer, key.as_ref())
                .map_err(TokenFailure::Dead)?;
            Ok((answer, binding))
        });
        let mut document = self.store.load().map_err(TokenFailure::Passing)?;
        match outcome {
            Ok((answer, binding)) => {
                let mut fresh = grant_from(
                    answer,
                    &Issued {
                        issuer: &grant.issuer,
                        token_endpoint: &grant.token_endpoint,
                        client_id: &grant.client_id,
                        resource: resource.as_deref(),
                        requested_scope: None,
                    },
                    Some(grant),
                    unix_now(),
                );
                fresh.dpop_key = binding;
                document.grants.insert(self.key(), fresh.clone());
                self.store.save(&document).map_err(TokenFailure::Passing)?;
                Ok(fresh)
            }
            Err(TokenFailure::Dead(e)) => {
                // Only forget the grant if it is still the one that failed.
                if document
                    .grants
                    .get(&self.key())
                    .and_then(|g| g.refresh_token.as_ref())
                    == Some(&refresh_token)
                {
                    document.grants.remove(&self.key());
                    self.store.save(&document).map_err(TokenFailure::Passing)?;
                }
                Err(TokenFailure::Dead(e))
            }
            Err(passing) => Err(passing),
        }
    }

    pub(super) fn scope(
        &self,
        found: &Discovered,
        challenge: Option<&Challenge>,
    ) -> Option<String> {
        // A step-up names exactly what it needs (the union, built by the provider).
        let step_up = challenge
            .filter(|c| c.error.as_deref() == Some("insufficient_scope"))
            .and_then(|c| c.scope.clone());
        step_up
            .or_else(|| self.settings.scope.clone())
            .or_else(|| challenge.and_then(|c| c.scope.clone()))
            .or_else(|| {
                found
                    .resource
                    .as_ref()
                    .and_then(|r| r.scopes_supported.as_ref())
                    .map(|s| s.join(" "))
            })
            .filter(|s| !s.trim().is_empty())
    }

    /// The client given with --client-id (and --client-secret or --client-key),
    /// authenticating the way the server's metadata allows (`found`; without it, Basic with
    /// a secret): a signed assertion with a key, else the secret, else nothing.
    pub(super) fn configured_client(
        &self,
        client_id: &str,
        found: Option<&Discovered>,
    ) -> Registration {
        let has_secret = self.settings.client_secret.is_some();
        let method = match found {
            _ if self.settings.client_key.is_some() => "private_key_jwt".to_owned(),
            Some(found) => {
                choose_auth_method(&found.server.token_endpoint_auth_methods, has_secret)
            }
            None if has_secret => "client_secret_basic".to_owned(),
            None => "none".to_owned(),
        };
        Registration {
            client_id: client_id.to_owned(),
            client_secret: self.settings.client_secret.clone(),
            client_secret_expires_at: None,
            token_endpoint_auth_method: method,
            redirect_uri: None,
        }
    }

    /// Registers at the discovered server (Dynamic Client Registration) and keeps the
    /// registration under its issuer. `redirect_uri` is `None` for the device flow.
    pub(super) async fn register_and_keep(
        &self,
        found: &Discovered,
        redirect_uri: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Registration, String> {
        let endpoint = found.server.registration_endpoint.as_ref().ok_or(
            "the authorization server offers no dynamic client registration; register a client there and pass --client-id (and --client-secret if it has one)",
        )?;
        let method = choose_auth_method(&found.server.token_endpoint_auth_methods, false);
        let registration = register(&self.http, endpoint, redirect_uri, &method, scope).await?;
        let mut document = self.store.load()?;
        document
            .registrations
            .insert(found.server.issuer.clone(), registration.clone());
        self.store.save(&document)?;
        Ok(registration)
    }

    /// Turns a login's token answer into this server's grant, stores it, and returns it.
    pub(super) fn keep_login(
        &self,
        answer: super::token::TokenAnswer,
        found: &Discovered,
        client_id: &str,
        scope: Option<&str>,
        how: &str,
        key: Option<&DpopKey>,
    ) -> Result<Grant, String> {
        let resource = self.resource_for(found);
        let dpop_key = self.binding_of(&answer, key)?;
        let mut grant = grant_from(
            answer,
            &Issued {
                issuer: &found.server.issuer,
                token_endpoint: found.server.token_endpoint.as_str(),
                client_id,
                resource: resource.as_deref(),
                requested_scope: scope,
            },
            None,
            unix_now(),
        );
        grant.revocation_endpoint = found
            .server
            .revocation_endpoint
            .as_ref()
            .map(|u| u.to_string());
        grant.dpop_key = dpop_key;
        self.store_grant(&grant)?;
        let bound = if grant.dpop_key.is_some() {
            " (DPoP-bound)"
        } else {
            ""
        };
        tracing::info!(issuer = %found.server.issuer, "logged in with {how}{bound}");
        Ok(grant)
    }

    /// Saves `grant` as this server's.
    pub(super) fn store_grant(&self, grant: &Grant) -> Result<(), String> {
        let mut document = self.store.load()?;
        document.grants.insert(self.key(), grant.clone());
        self.store.save(&document)
    }
}

/// The Bearer challenge of a 401 or 403 answer.
pub fn challenge_of(fetched: &Fetched) -> Option<Challenge> {
    if !matches!(fetched.status.as_u16(), 401 | 403) {
        return None;
    }
    challenge::bearer(
        fetched
            .headers
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
    .or(Some(Challenge::default()))
}
