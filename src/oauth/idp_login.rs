//! The ID token enterprise-managed authorization starts from: read from
//! `--idp-id-token-file` (one obtained elsewhere), or the IdP login kept in the token
//! store while its ID token is fresh, renewed with its refresh token, or a new OpenID
//! Connect login in the browser (code flow with PKCE, `nonce` checked). One IdP login
//! serves every MCP server of the organisation until it expires.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::authorize::{AuthorizationRequest, Expected, authorization_url};
use super::callback::CallbackServer;
use super::flow::ServerAuth;
use super::idp::{IdpEndpoints, IdpSettings};
use super::pkce::{Pkce, random_token};
use super::store::{IdpLogin, idp_key};
use super::token::{TokenAnswer, TokenFailure, code_exchange_form, unix_now};
use crate::secret::Secret;

impl ServerAuth {
    /// An ID token from the organisation's IdP, from the first source that has one, and
    /// whether it is the login kept in the store (which a refusal should end).
    pub(super) async fn idp_id_token(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        interactive: bool,
    ) -> Result<(Secret, bool), String> {
        if let Some(path) = &idp.id_token_file {
            let max = self.settings.max_credential_file;
            let token = super::jwt_bearer::read_jwt_file(path, "--idp-id-token-file", max)?;
            return Ok((token, false));
        }
        let kept = self
            .store
            .load()?
            .idp_logins
            .get(&idp_key(&idp.issuer, &idp.client_id))
            .cloned();
        let leeway = self.settings.refresh_leeway.as_secs();
        if let Some(kept) = &kept {
            // An ID token whose expiry cannot be read is not reused: it may be long dead.
            if kept
                .expires_at
                .is_some_and(|at| at > unix_now().saturating_add(leeway))
            {
                return Ok((kept.id_token.clone(), true));
            }
            if let Some(refresh_token) = &kept.refresh_token {
                match self.refresh_idp_login(idp, endpoints, refresh_token).await {
                    Ok(id_token) => return Ok((id_token, true)),
                    Err(TokenFailure::Dead(e)) => {
                        tracing::warn!("the login at {} has ended: {e}", idp.issuer);
                        self.forget_idp_login(idp)?;
                    }
                    Err(TokenFailure::Passing(e)) => {
                        tracing::warn!("could not renew the login at {}: {e}", idp.issuer);
                    }
                }
            }
        }
        if !interactive {
            return Err(format!(
                "no usable login at the identity provider {}: run `mcp-stdio login {}` with the same --idp-issuer, --idp-client-id and --client-id in a terminal, start the relay with --oauth, or pass --idp-id-token-file",
                idp.issuer, self.server
            ));
        }
        let id_token = self.browser_idp_login(idp, endpoints).await?;
        Ok((id_token, false))
    }

    /// Forgets the IdP login kept in the store (it ended, or the IdP refused its token).
    pub(super) fn forget_idp_login(&self, idp: &IdpSettings) -> Result<(), String> {
        let mut document = self.store.load()?;
        if document
            .idp_logins
            .remove(&idp_key(&idp.issuer, &idp.client_id))
            .is_some()
        {
            self.store.save(&document)?;
        }
        Ok(())
    }

    /// The kept login's refresh token for a new ID token.
    async fn refresh_idp_login(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        refresh_token: &Secret,
    ) -> Result<Secret, TokenFailure> {
        let form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.expose()),
            ("scope", "openid"),
        ];
        let answer = self.idp_token_request(idp, endpoints, form).await?;
        self.keep_idp_login(idp, endpoints, answer, Some(refresh_token), None)
            .map_err(TokenFailure::Dead)
    }

    /// An OpenID Connect login at the IdP in the browser.
    async fn browser_idp_login(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
    ) -> Result<Secret, String> {
        let endpoint = endpoints.authorization_endpoint.as_ref().ok_or_else(|| {
            format!(
                "the identity provider {} has no authorization endpoint for a browser login; pass --idp-id-token-file",
                idp.issuer
            )
        })?;
        let port = self.settings.callback_port;
        let callback = CallbackServer::start(port.unwrap_or(0), port.is_none()).await?;
        let (pkce, state, nonce) = (Pkce::generate(), random_token(32), random_token(16));
        let scope = if endpoints.offline_access {
            "openid offline_access"
        } else {
            "openid"
        };
        let mut url = authorization_url(&AuthorizationRequest {
            endpoint,
            client_id: &idp.client_id,
            redirect_uri: &callback.redirect_uri,
            state: &state,
            code_challenge: &pkce.challenge,
            resource: None,
            scope: Some(scope),
        });
        url.query_pairs_mut().append_pair("nonce", nonce.expose());
        let redirect_uri = callback.redirect_uri.clone();
        let expected = Expected {
            state: &state,
            issuer: &idp.issuer,
            iss_required: endpoints.iss_parameter_supported,
        };
        let who = format!(
            "to log in at your organisation's identity provider {}",
            idp.issuer
        );
        let code = self
            .authorize_in_browser(&url, callback, &expected, &who)
            .await?;
        let form = code_exchange_form(&code, &pkce.verifier, &redirect_uri, &idp.client_id, None);
        let answer = self
            .idp_token_request(idp, endpoints, form)
            .await
            .map_err(|f| format!("the identity provider {}: {}", idp.issuer, f.into_message()))?;
        self.keep_idp_login(idp, endpoints, answer, None, Some(&nonce))
    }

    /// Stores the IdP's answer (its ID token, and the refresh token it gave or the one
    /// used) and returns the ID token. The ID token must name the IdP and our client there,
    /// and, with `nonce` (a browser login), carry it.
    fn keep_idp_login(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        answer: TokenAnswer,
        used_refresh: Option<&Secret>,
        nonce: Option<&Secret>,
    ) -> Result<Secret, String> {
        let id_token = answer.id_token.ok_or_else(|| {
            format!(
                "the identity provider {} answered without an ID token (is `openid` an allowed scope for client {}?)",
                idp.issuer, idp.client_id
            )
        })?;
        let claims = claims_of(&id_token);
        let audience_ok = match &claims["aud"] {
            serde_json::Value::String(aud) => aud == &idp.client_id,
            serde_json::Value::Array(auds) => auds.iter().any(|a| a == idp.client_id.as_str()),
            _ => false,
        };
        let issuer_ok = claims["iss"]
            .as_str()
            .is_some_and(|iss| iss.trim_end_matches('/') == idp.issuer.trim_end_matches('/'));
        let nonce_ok = nonce.is_none_or(|n| claims["nonce"].as_str() == Some(n.expose()));
        if !(audience_ok && issuer_ok && nonce_ok) {
            return Err(format!(
                "the ID token from {} is not for this login (its issuer, audience or nonce differs); it is not used",
                idp.issuer
            ));
        }
        let login = IdpLogin {
            id_token: id_token.clone(),
            expires_at: claims["exp"].as_u64(),
            refresh_token: answer.refresh_token.or_else(|| used_refresh.cloned()),
            token_endpoint: endpoints.token_endpoint.to_string(),
        };
        let mut document = self.store.load()?;
        document
            .idp_logins
            .insert(idp_key(&idp.issuer, &idp.client_id), login);
        self.store.save(&document)?;
        tracing::info!(idp = %idp.issuer, "logged in at the identity provider");
        Ok(id_token)
    }
}

/// A JWT's claims, read without checking its signature: the IdP that issued it checks it
/// when it is exchanged; we only need its expiry and nonce. `Null` when unreadable.
fn claims_of(jwt: &Secret) -> serde_json::Value {
    jwt.expose()
        .split('.')
        .nth(1)
        .and_then(|part| URL_SAFE_NO_PAD.decode(part).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(serde_json::Value::Null)
}
