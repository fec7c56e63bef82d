//! The client credentials grant (OAuth 2.1 §4.2, MCP SEP-1046): a machine logs in as itself
//! with a client secret or a signed JWT, no user and no browser.

use super::discovery::Discovered;
use super::flow::ServerAuth;
use super::registration::choose_auth_method;
use super::store::{Grant, Registration};
use super::token::TokenFailure;

impl ServerAuth {
    /// Whether this login is the client credentials grant: asked for with
    /// `--client-credentials`, or the only grant a server that lists its grants offers to a
    /// client that has credentials.
    pub(super) fn uses_client_credentials(&self, found: &Discovered) -> bool {
        let has_credentials = self.settings.client_id.is_some()
            && (self.settings.client_secret.is_some() || self.settings.client_key.is_some());
        let grants = found
            .server
            .grant_types_supported
            .as_deref()
            .unwrap_or_default();
        self.settings.client_credentials
            || (has_credentials
                && grants.iter().any(|g| g == "client_credentials")
                && !grants.iter().any(|g| g == "authorization_code"))
    }

    /// Whether a login needs nobody at the keyboard (so a relay may run it without --oauth).
    pub fn unattended(&self) -> bool {
        self.settings.client_credentials
            || self.settings.workload_token_file.is_some()
            || self.settings.idp.is_some()
            || (self.settings.client_id.is_some()
                && (self.settings.client_secret.is_some() || self.settings.client_key.is_some()))
    }

    /// A login that needs nobody: the client credentials grant if this server uses it,
    /// otherwise an error that says how to log in.
    pub async fn login_unattended(
        &self,
        challenge: Option<&super::challenge::Challenge>,
    ) -> Result<Grant, String> {
        let found = super::discovery::discover(&self.http, &self.server, challenge).await?;
        let scope = self.scope(&found, challenge);
        let key = self.login_key(&found, challenge)?;
        if let Some(path) = &self.settings.workload_token_file {
            return self
                .login_workload(path, &found, scope.as_deref(), key)
                .await;
        }
        if let Some(idp) = &self.settings.idp {
            return self
                .login_enterprise(idp, &found, scope.as_deref(), key, false)
                .await;
        }
        if !self.uses_client_credentials(&found) {
            return Err(format!(
                "HTTP 401 from upstream: the server requires a user login; run `mcp-stdio login {}` in a terminal, or start the relay with --oauth",
                self.server
            ));
        }
        self.login_client_credentials(&found, scope.as_deref(), key)
            .await
    }

    pub(super) async fn login_client_credentials(
        &self,
        found: &Discovered,
        scope: Option<&str>,
        key: Option<super::dpop::DpopKey>,
    ) -> Result<Grant, String> {
        let client_id = self.settings.client_id.clone().ok_or(
            "the client credentials grant needs --client-id with --client-secret or --client-key",
        )?;
        let method = if self.settings.client_key.is_some() {
            "private_key_jwt".to_owned()
        } else {
            choose_auth_method(&found.server.token_endpoint_auth_methods, true)
        };
        let client = Registration {
            client_id: client_id.clone(),
            client_secret: self.settings.client_secret.clone(),
            client_secret_expires_at: None,
            token_endpoint_auth_method: method,
            redirect_uri: None,
        };
        let resource = self.resource_for(found);
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        if let Some(resource) = resource.as_deref() {
            form.push(("resource", resource));
        }
        let answer = self
            .token_request_at(found, form, &client, key.as_ref())
            .await
            .map_err(|f| match f {
                TokenFailure::Dead(e) | TokenFailure::Passing(e) => e,
            })?;
        self.keep_login(
            answer,
            found,
            &client_id,
            scope,
            "client credentials",
            key.as_ref(),
        )
    }
}
