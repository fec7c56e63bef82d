//! Enterprise-managed authorization (SEP-990, the "cross-app access" of the identity
//! providers): the organisation's identity provider vouches for the user, so no consent
//! screen per MCP server. An ID token from the IdP (see `idp_login`) is exchanged there
//! for an ID-JAG (RFC 8693 token exchange: `requested_token_type` id-jag, `audience` the
//! MCP authorization server's issuer, `resource` the MCP server's), which the MCP
//! authorization server takes with the JWT bearer grant and our client's authentication.

use super::discovery::Discovered;
use super::dpop::DpopKey;
use super::flow::ServerAuth;
use super::idp::{IdpEndpoints, IdpSettings, idp_endpoints};
use super::store::{Grant, Registration, idp_key};
use super::token::{TokenAnswer, TokenFailure, answer_of};
use crate::secret::Secret;

/// RFC 8693's grant type and the token types this flow names.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
pub const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

impl ServerAuth {
    /// Logs in to the MCP server with an ID-JAG from the organisation's IdP and stores the
    /// grant. `interactive`: a browser login at the IdP may run when no ID token is at hand.
    pub(super) async fn login_enterprise(
        &self,
        idp: &IdpSettings,
        found: &Discovered,
        scope: Option<&str>,
        key: Option<DpopKey>,
        interactive: bool,
    ) -> Result<Grant, String> {
        let client_id = self.settings.client_id.clone().ok_or(
            "enterprise-managed authorization needs --client-id (and MCP_OAUTH_CLIENT_SECRET): the client registered at the MCP server's authorization server",
        )?;
        let endpoints = self.idp_endpoints(idp).await?;
        let id_jag = {
            // One IdP login at a time across processes: many relays share it.
            let _idp_lock = self
                .exclusive_on(&idp_key(&idp.issuer, &idp.client_id))
                .await;
            let (id_token, kept) = self.idp_id_token(idp, &endpoints, interactive).await?;
            let exchanged = self
                .exchange_for_id_jag(idp, &endpoints, &id_token, found, scope)
                .await;
            if let Err(TokenFailure::Dead(_)) = &exchanged
                && kept
            {
                // The IdP no longer takes the kept ID token (a session ended, a user
                // disabled): forget it, so the next login starts at the IdP afresh.
                self.forget_idp_login(idp)?;
            }
            exchanged.map_err(|f| {
                format!(
                    "the identity provider {} would not issue an ID-JAG for {}: {}",
                    idp.issuer,
                    found.server.issuer,
                    f.into_message()
                )
            })?
        };
        let client = self.configured_client(&client_id, Some(found));
        let answer = self
            .jwt_bearer(found, &id_jag, &client, scope, key.as_ref())
            .await
            .map_err(|f| {
                format!(
                    "the MCP server's authorization server ({}) did not accept the ID-JAG from {}: {}",
                    found.server.issuer,
                    idp.issuer,
                    f.into_message()
                )
            })?;
        let how = format!("an ID-JAG from {}", idp.issuer);
        self.keep_login(answer, found, &client_id, scope, &how, key.as_ref())
    }

    /// RFC 8693 at the IdP: the ID token for an ID-JAG naming the MCP authorization
    /// server (`audience`) and the MCP server (`resource`, as its metadata publishes it).
    async fn exchange_for_id_jag(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        id_token: &Secret,
        found: &Discovered,
        scope: Option<&str>,
    ) -> Result<Secret, TokenFailure> {
        let resource = self.resource_for(found).ok_or_else(|| {
            TokenFailure::Dead(
                "enterprise-managed authorization needs the MCP server's resource: drop --no-resource-indicator".into(),
            )
        })?;
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE),
            ("requested_token_type", ID_JAG_TYPE),
            ("audience", found.server.issuer.as_str()),
            ("resource", resource.as_str()),
            ("subject_token", id_token.expose()),
            ("subject_token_type", ID_TOKEN_TYPE),
        ];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        let answer = self.idp_token_request(idp, endpoints, form).await?;
        // RFC 8693 §2.2.1: `issued_token_type` is required; it must be what was asked.
        match answer.issued_token_type.as_deref() {
            Some(ID_JAG_TYPE) => Ok(answer.access_token),
            other => Err(TokenFailure::Dead(format!(
                "it issued {} where an ID-JAG ({ID_JAG_TYPE}) was asked for",
                other.unwrap_or("a token of no stated type")
            ))),
        }
    }

    /// A token request at the IdP as our client there (HTTP Basic with its secret, or its
    /// bare `client_id`), read into an answer.
    pub(super) async fn idp_token_request(
        &self,
        idp: &IdpSettings,
        endpoints: &IdpEndpoints,
        mut form: Vec<(&'static str, &str)>,
    ) -> Result<TokenAnswer, TokenFailure> {
        let client = Registration {
            client_id: idp.client_id.clone(),
            client_secret: idp.client_secret.clone(),
            client_secret_expires_at: None,
            token_endpoint_auth_method: if idp.client_secret.is_some() {
                "client_secret_basic".into()
            } else {
                "none".into()
            },
            redirect_uri: None,
        };
        if !form.iter().any(|(k, _)| *k == "client_id") {
            form.push(("client_id", &idp.client_id));
        }
        let fetched = self
            .authenticated_post(&endpoints.token_endpoint, form, &client, &idp.issuer, None)
            .await
            .map_err(TokenFailure::Passing)?;
        answer_of(&fetched)
    }

    /// The IdP's endpoints from its metadata (RFC 8414, then OpenID Connect discovery),
    /// whose `issuer` must be the one configured.
    async fn idp_endpoints(&self, idp: &IdpSettings) -> Result<IdpEndpoints, String> {
        let issuer = url::Url::parse(&idp.issuer)
            .map_err(|e| format!("--idp-issuer '{}' is not a URL ({e})", idp.issuer))?;
        let metadata = super::discovery::server_metadata(&self.http, &issuer, "--idp-issuer")
            .await
            .map_err(|e| format!("the identity provider {}: {e}", idp.issuer))?;
        idp_endpoints(&metadata)
    }
}
