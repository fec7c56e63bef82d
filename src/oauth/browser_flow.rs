//! The browser login: a loopback callback (on the port a cached registration used, when it
//! is free), the client identity (configured, a metadata document, cached or registered),
//! the authorization URL with PKCE, the callback's code and its exchange.

use url::Url;

use super::authorize::{AuthorizationRequest, Expected, authorization_url, code_from_callback};
use super::callback::CallbackServer;
use super::discovery::Discovered;
use super::flow::ServerAuth;
use super::pkce::{Pkce, random_token};
use super::registration::still_valid;
use super::store::{Grant, Registration};
use super::token::{TokenFailure, code_exchange_form, unix_now};
use crate::logging::notice;

impl ServerAuth {
    /// Logs in through the user's browser and stores the grant.
    pub(super) async fn login_browser(
        &self,
        found: &Discovered,
        scope: Option<&str>,
        key: Option<super::dpop::DpopKey>,
    ) -> Result<Grant, String> {
        let (callback, cached) = self.callback(found).await?;
        let client = self.browser_client(found, scope, &callback, cached).await?;
        let pkce = Pkce::generate();
        let state = random_token(32);
        let resource = self.resource_for(found);
        let url = authorization_url(&AuthorizationRequest {
            endpoint: &found.server.authorization_endpoint,
            client_id: &client.client_id,
            redirect_uri: &callback.redirect_uri,
            state: &state,
            code_challenge: &pkce.challenge,
            resource: resource.as_deref(),
            scope,
        });
        let who = format!(
            "to log in to {}",
            self.server.origin().ascii_serialization()
        );
        let expected = Expected {
            state: &state,
            issuer: &found.server.issuer,
            iss_required: found.server.iss_parameter_supported,
        };
        let redirect_uri = callback.redirect_uri.clone();
        let code = self
            .authorize_in_browser(&url, callback, &expected, &who)
            .await?;
        let form = code_exchange_form(
            &code,
            &pkce.verifier,
            &redirect_uri,
            &client.client_id,
            resource.as_deref(),
        );
        let answer = self
            .token_request_at(found, form, &client, key.as_ref())
            .await
            .map_err(TokenFailure::into_message)?;
        self.keep_login(
            answer,
            found,
            &client.client_id,
            scope,
            "a browser",
            key.as_ref(),
        )
    }

    /// The loopback callback, and the cached registration for this issuer if one may be
    /// reused (a client id given on the command line wins over any).
    async fn callback(
        &self,
        found: &Discovered,
    ) -> Result<(CallbackServer, Option<Registration>), String> {
        let preferred_port = self.settings.callback_port;
        let document = self.store.load()?;
        let cached = document
            .registrations
            .get(&found.server.issuer)
            .filter(|r| still_valid(r, unix_now()))
            .filter(|_| self.settings.client_id.is_none())
            .cloned();
        // A cached registration's redirect URI is reused when its port is free, so servers
        // that match loopback ports exactly keep accepting it.
        let cached_port = cached
            .as_ref()
            .and_then(|r| r.redirect_uri.as_deref())
            .and_then(|u| Url::parse(u).ok())
            .and_then(|u| u.port());
        let callback = match (preferred_port, cached_port) {
            (Some(port), _) => CallbackServer::start(port, false).await?,
            (None, Some(port)) => CallbackServer::start(port, true).await?,
            (None, None) => CallbackServer::start(0, true).await?,
        };
        Ok((callback, cached))
    }

    /// Who the client is for this login.
    async fn browser_client(
        &self,
        found: &Discovered,
        scope: Option<&str>,
        callback: &CallbackServer,
        cached: Option<Registration>,
    ) -> Result<Registration, String> {
        let cimd = self
            .settings
            .client_metadata_url
            .clone()
            .filter(|_| found.server.client_id_metadata_documents);
        if self.settings.client_metadata_url.is_some() && cimd.is_none() {
            tracing::warn!(
                "the authorization server does not accept client metadata documents; registering instead"
            );
        }
        Ok(match (&self.settings.client_id, cached) {
            // A Client ID Metadata Document: the URL is the client id, nothing to register.
            (None, _) if cimd.is_some() => Registration {
                client_id: cimd.unwrap_or_default(),
                client_secret: None,
                client_secret_expires_at: None,
                token_endpoint_auth_method: "none".into(),
                redirect_uri: None,
            },
            (Some(client_id), _) => self.configured_client(client_id, Some(found)),
            (None, Some(cached))
                if cached.redirect_uri.as_deref() == Some(&callback.redirect_uri) =>
            {
                cached
            }
            (None, _) => {
                self.register_and_keep(found, Some(&callback.redirect_uri), scope)
                    .await?
            }
        })
    }

    /// Shows (and opens, unless --no-browser) the authorization URL, waits for the
    /// browser to come back to `callback`, and returns the code once `expected` holds.
    /// `who` starts the notice ("to log in to …").
    pub(super) async fn authorize_in_browser(
        &self,
        url: &Url,
        callback: CallbackServer,
        expected: &Expected<'_>,
        who: &str,
    ) -> Result<crate::secret::Secret, String> {
        notice(&format!("{who}, open this URL in a browser:\n  {url}"));
        if self.settings.open_browser {
            let target = url.to_string();
            let opened = tokio::task::spawn_blocking(move || webbrowser::open(&target)).await;
            if !matches!(opened, Ok(Ok(()))) {
                notice("could not open a browser; open the URL above by hand");
            }
        }
        let query = callback.wait(self.settings.timeout).await?;
        code_from_callback(&query, expected)
    }
}
