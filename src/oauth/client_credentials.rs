//! The client credentials grant (OAuth 2.1 §4.2, MCP SEP-1046): a machine logs in as itself
//! with a client secret or a signed JWT, no user and no browser.

use super::discovery::Discovered;
use super::flow::ServerAuth;
use super::store::Grant;
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

    pub(super) async fn login_client_credentials(
        &self,
        found: &Discovered,
        scope: Option<&str>,
        key: Option<super::dpop::DpopKey>,
    ) -> Result<Grant, String> {
        let client_id = self.settings.client_id.clone().ok_or(
            "the client credentials grant needs --client-id with --client-secret or --client-key",
        )?;
        let client = self.configured_client(&client_id, Some(found));
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
            .map_err(TokenFailure::into_message)?;
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
