//! The ID token enterprise-managed authorization starts from: read from
//! `--idp-id-token-file` (one obtained elsewhere), or the IdP login kept in the token
//! store while its ID token is fresh, renewed with its refresh token, or a new OpenID
//! Connect login in the browser (code flow with PKCE, `nonce` checked). One IdP login
//! serves every MCP server of the organisation until it expires.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::authorize::{AuthorizationRequest, Expected, authorization_url, code_from_callback};
use super::callback::CallbackServer;
use super::flow::ServerAuth;
use super::idp::{IdpEndpoints, IdpSettings};
use super::pkce::{Pkce, random_token};
use super::store::{IdpLogin, idp_key};
use super::token::{TokenAnswer, TokenFailure, code_exchange_form, read_answer, unix_now};
use crate::logging::notice;
use crate::secret::Secret;

impl ServerAuth {
    /// An ID token from the organisation's IdP, from the first source that has one.
    pub(super) async fn idp_id_token(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        interactive: bool,
    ) -> Result<Secret, String> {
        if let Some(path) = &idp.id_token_file {
            let max = self.settings.max_credential_file;
            return super::jwt_bearer::read_jwt_file(path, "--idp-id-token-file", max);
        }
        let key = idp_key(&idp.issuer, &idp.client_id);
        let kept = self.store.load()?.idp_logins.get(&key).cloned();
        let leeway = self.settings.refresh_leeway.as_secs();
        if let Some(kept) = &kept {
            if kept
                .expires_at
                .is_none_or(|at| at > unix_now().saturating_add(leeway))
            {
                return Ok(kept.id_token.clone());
            }
            if let Some(refresh_token) = &kept.refresh_token {
                match self.refresh_idp_login(idp, endpoints, refresh_token).await {
                    Ok(id_token) => return Ok(id_token),
                    Err(e) => tracing::warn!("could not renew the login at {}: {e}", idp.issuer),
                }
            }
        }
        if !interactive {
            return Err(format!(
                "no usable login at the identity provider {}: run `mcp-stdio login {} --idp-issuer {} --idp-client-id {}` in a terminal, start the relay with --oauth, or pass --idp-id-token-file",
                idp.issuer, self.server, idp.issuer, idp.client_id
            ));
        }
        self.browser_idp_login(idp, endpoints).await
    }

    /// The kept login's refresh token for a new ID token.
    async fn refresh_idp_login(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        refresh_token: &Secret,
    ) -> Result<Secret, String> {
        let form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.expose()),
            ("scope", "openid"),
        ];
        let answer = self
            .idp_token_request(idp, &endpoints.token_endpoint, form)
            .await?;
        self.keep_idp_login(idp, endpoints, answer, Some(refresh_token), None)
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
        notice(&format!(
            "to log in at your organisation's identity provider {}, open this URL in a browser:\n  {url}",
            idp.issuer
        ));
        if self.settings.open_browser {
            let target = url.to_string();
            let opened = tokio::task::spawn_blocking(move || webbrowser::open(&target)).await;
            if !matches!(opened, Ok(Ok(()))) {
                notice("could not open a browser; open the URL above by hand");
            }
        }
        let redirect_uri = callback.redirect_uri.clone();
        let query = callback.wait(self.settings.timeout).await?;
        let code = code_from_callback(
            &query,
            &Expected {
                state: &state,
                issuer: &idp.issuer,
                iss_required: endpoints.iss_parameter_supported,
            },
        )?;
        let form = code_exchange_form(&code, &pkce.verifier, &redirect_uri, &idp.client_id, None);
        let answer = self
            .idp_token_request(idp, &endpoints.token_endpoint, form)
            .await?;
        self.keep_idp_login(idp, endpoints, answer, None, Some(&nonce))
    }

    /// A token request at the IdP, read into an answer.
    async fn idp_token_request(
        &self,
        idp: &IdpSettings,
        endpoint: &url::Url,
        form: Vec<(&'static str, &str)>,
    ) -> Result<TokenAnswer, String> {
        let fetched = self.idp_post(idp, endpoint, form).await?;
        let content_type = fetched
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        read_answer(fetched.status, content_type, &fetched.body).map_err(|f| {
            let (TokenFailure::Dead(e) | TokenFailure::Passing(e)) = f;
            format!("the identity provider {}: {e}", idp.issuer)
        })
    }

    /// Stores the IdP's answer (its ID token, and the refresh token it gave or the one
    /// used) and returns the ID token. With `nonce`, the ID token must carry it.
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
        if let Some(nonce) = nonce
            && claims["nonce"].as_str() != Some(nonce.expose())
        {
            return Err(format!(
                "the ID token from {} does not carry this login's nonce; it is not used",
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
