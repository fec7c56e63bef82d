//! Enterprise-managed authorization (SEP-990, the "cross-app access" of the identity
//! providers): the organisation's identity provider vouches for the user, so no consent
//! screen per MCP server. An ID token from the IdP (see `idp_login`) is exchanged there
//! for an ID-JAG (RFC 8693 token exchange: `requested_token_type` id-jag, `audience` the
//! MCP authorization server's issuer, `resource` the MCP server's), which the MCP
//! authorization server takes with the JWT bearer grant and our client's authentication.

use super::discovery::Discovered;
use super::dpop::DpopKey;
use super::flow::ServerAuth;
use super::http::BasicAuth;
use super::idp::{IdpEndpoints, IdpSettings, idp_endpoints};
use super::store::Grant;
use super::token::{TokenFailure, read_answer};
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
        let id_token = self.idp_id_token(idp, &endpoints, interactive).await?;
        let id_jag = self
            .exchange_for_id_jag(idp, &endpoints, &id_token, found, scope)
            .await?;
        let client = self.configured_client(&client_id, found);
        let answer = self
            .jwt_bearer(found, &id_jag, &client, scope, key.as_ref())
            .await
            .map_err(|f| {
                let (TokenFailure::Dead(e) | TokenFailure::Passing(e)) = f;
                format!(
                    "the MCP server's authorization server ({}) did not accept the ID-JAG from {}: {e}",
                    found.server.issuer, idp.issuer
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
    ) -> Result<Secret, String> {
        let resource = self.resource_for(found).ok_or(
            "enterprise-managed authorization needs the MCP server's resource: drop --no-resource-indicator",
        )?;
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
        let fetched = self
            .idp_post(idp, &endpoints.token_endpoint, form)
            .await
            .map_err(|e| format!("the token exchange at {} failed: {e}", idp.issuer))?;
        let content_type = fetched
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let answer = read_answer(fetched.status, content_type, &fetched.body).map_err(|f| {
            let (TokenFailure::Dead(e) | TokenFailure::Passing(e)) = f;
            format!(
                "the identity provider {} would not issue an ID-JAG for {}: {e}",
                idp.issuer, found.server.issuer
            )
        })?;
        match answer.issued_token_type.as_deref() {
            None | Some(ID_JAG_TYPE) => Ok(answer.access_token),
            Some(other) => Err(format!(
                "the identity provider {} issued a {other} where an ID-JAG ({ID_JAG_TYPE}) was asked for",
                idp.issuer
            )),
        }
    }

    /// POSTs a form to the IdP as our client there: HTTP Basic with its secret, or the
    /// bare `client_id` without one.
    pub(super) async fn idp_post(
        &self,
        idp: &IdpSettings,
        endpoint: &url::Url,
        mut form: Vec<(&'static str, &str)>,
    ) -> Result<super::http::Fetched, String> {
        let basic = match &idp.client_secret {
            Some(secret) => {
                form.retain(|(k, _)| *k != "client_id");
                Some(BasicAuth {
                    client_id: &idp.client_id,
                    client_secret: secret.expose(),
                })
            }
            None => {
                if !form.iter().any(|(k, _)| *k == "client_id") {
                    form.push(("client_id", &idp.client_id));
                }
                None
            }
        };
        self.http.post_form(endpoint, &form, basic).await
    }

    /// The IdP's endpoints from its metadata (RFC 8414, then OpenID Connect discovery),
    /// whose `issuer` must be the one configured.
    async fn idp_endpoints(&self, idp: &IdpSettings) -> Result<IdpEndpoints, String> {
        let issuer = url::Url::parse(&idp.issuer)
            .map_err(|e| format!("--idp-issuer '{}' is not a URL ({e})", idp.issuer))?;
        let metadata = crate::jwks::server_metadata(&self.http, &issuer, "--idp-issuer")
            .await
            .map_err(|e| format!("the identity provider {}: {e}", idp.issuer))?;
        idp_endpoints(&metadata)
    }
}
