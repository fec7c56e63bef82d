//! The relay's source of `Authorization` values: the stored grant, refreshed ahead of
//! expiry, refreshed (once) after a 401, and replaced by a new login when the grant is dead
//! and a browser login is allowed. One refresh or login at a time: concurrent requests that
//! all met a 401 share it.

use http::HeaderValue;

use super::challenge::Challenge;
use super::flow::ServerAuth;
use super::store::Grant;
use super::token::{TokenFailure, needs_refresh, unix_now};

pub struct TokenProvider {
    session: ServerAuth,
    /// Scope sets already asked for in a step-up: each is tried once, so a server that
    /// keeps refusing cannot loop us through logins.
    stepped_up: std::sync::Mutex<std::collections::HashSet<String>>,
    /// May this process run a browser login (`--oauth`), or only use and refresh a grant
    /// made by `mcp-stdio login`?
    interactive: bool,
    current: tokio::sync::Mutex<Option<Grant>>,
}

impl TokenProvider {
    /// The provider for `server`, built the one way the relay and the terminal commands
    /// share (store, then the server's login state, then this).
    pub fn for_server(
        oauth: &super::OAuthConfig,
        client: &crate::http::client::ClientOptions,
        max_body: usize,
        server: &url::Url,
    ) -> Result<Self, String> {
        let session = oauth.server_auth(client.clone(), max_body, server.clone())?;
        Ok(Self::new(session, oauth.interactive))
    }

    pub fn new(session: ServerAuth, interactive: bool) -> Self {
        let stored = session.stored().unwrap_or_else(|e| {
            tracing::warn!("{e}");
            None
        });
        TokenProvider {
            session,
            stepped_up: std::sync::Mutex::new(std::collections::HashSet::new()),
            interactive,
            current: tokio::sync::Mutex::new(stored),
        }
    }

    /// The server's login state this provider draws on (its stored grant, its settings).
    pub fn server_auth(&self) -> &ServerAuth {
        &self.session
    }

    /// The value for the next request's `Authorization` header; `None` before any login
    /// (the server's 401 then starts one). Refreshes first when the token is about to expire.
    pub async fn authorization(&self) -> Option<HeaderValue> {
        let mut current = self.current.lock().await;
        let grant = current.as_ref()?;
        let leeway = self.session.settings.refresh_leeway.as_secs();
        if needs_refresh(grant, unix_now(), leeway) && grant.refresh_token.is_some() {
            let _exclusive = self.session.exclusive().await;
            // Another process may have refreshed while we waited: its grant is on disk.
            if let Ok(Some(stored)) = self.session.stored()
                && stored.access_token != grant.access_token
                && !needs_refresh(&stored, unix_now(), leeway)
            {
                *current = Some(stored);
                return current.as_ref().map(header_value);
            }
            let grant = current.clone()?;
            match self.session.refresh(&grant).await {
                Ok(fresh) => *current = Some(fresh),
                Err(TokenFailure::Passing(e)) => {
                    tracing::warn!("could not refresh the access token ahead of expiry: {e}");
                }
                Err(TokenFailure::Dead(e)) => {
                    tracing::warn!("the stored login is no longer valid: {e}");
                    *current = None;
                }
            }
        }
        current.as_ref().map(header_value)
    }

    /// Called after a 401 to a request that carried `sent`. Returns the value to retry
    /// with, or the message the host should see.
    pub async fn after_unauthorized(
        &self,
        sent: Option<&HeaderValue>,
        challenge: Option<Challenge>,
    ) -> Result<HeaderValue, String> {
        let mut current = self.current.lock().await;
        // Another request already replaced the token that was refused: use the new one.
        if let Some(grant) = current.as_ref() {
            let now = header_value(grant);
            if sent != Some(&now) {
                return Ok(now);
            }
        }
        // From here on one process at a time: another relay may be refreshing or logging in.
        let _exclusive = self.session.exclusive().await;
        // The disk may hold a newer grant (a `login` in another terminal, another relay).
        if let Ok(Some(stored)) = self.session.stored()
            && Some(header_value(&stored)) != sent.cloned()
        {
            let value = header_value(&stored);
            *current = Some(stored);
            return Ok(value);
        }
        if let Some(grant) = current.clone()
            && !self
                .session
                .issuer_still_current(&grant, challenge.as_ref())
                .await
        {
            tracing::warn!(
                old = %grant.issuer,
                "the server now names another authorization server; logging in there afresh"
            );
            *current = None;
        }
        if let Some(grant) = current.clone()
            && grant.refresh_token.is_some()
        {
            match self.session.refresh(&grant).await {
                Ok(fresh) => {
                    let value = header_value(&fresh);
                    *current = Some(fresh);
                    return Ok(value);
                }
                Err(TokenFailure::Passing(e)) => {
                    return Err(format!(
                        "the server refused the access token and refreshing it failed for now: {e}"
                    ));
                }
                Err(TokenFailure::Dead(e)) => {
                    tracing::warn!("the stored login is no longer valid: {e}");
                    *current = None;
                }
            }
        }
        if !self.interactive && !self.session.unattended() {
            return Err(format!(
                "HTTP 401 from upstream: the server requires authorization; run `mcp-stdio login {}` in a terminal (OAuth), start the relay with --oauth, or pass --bearer-token (or MCP_BEARER_TOKEN) or -H 'Authorization: ...'",
                self.session.server
            ));
        }
        let grant = if self.interactive {
            self.session.login(challenge.as_ref()).await?
        } else {
            self.session.login_unattended(challenge.as_ref()).await?
        };
        let value = header_value(&grant);
        *current = Some(grant);
        Ok(value)
    }
}

impl TokenProvider {
    /// Called after `403 insufficient_scope`: logs in again asking for the union of the
    /// scopes held and the scopes the challenge names (2026-07-28 step-up), once per set.
    pub async fn after_insufficient_scope(
        &self,
        sent: Option<&HeaderValue>,
        challenge: Challenge,
    ) -> Result<HeaderValue, String> {
        let mut current = self.current.lock().await;
        if let Some(grant) = current.as_ref()
            && sent != Some(&header_value(grant))
        {
            return Ok(header_value(grant)); // someone already stepped up
        }
        let held = current
            .as_ref()
            .and_then(|g| g.scope.clone())
            .unwrap_or_default();
        let wanted = union(&held, &challenge.scopes());
        if wanted == union(&held, &[]) {
            return Err(format!(
                "HTTP 403 from upstream: insufficient scope, but the server names no scope beyond the ones held ({held})"
            ));
        }
        if !self
            .stepped_up
            .lock()
            .expect("step-up lock")
            .insert(wanted.clone())
        {
            return Err(format!(
                "HTTP 403 from upstream: still insufficient scope after logging in again with '{wanted}'"
            ));
        }
        if !self.interactive {
            return Err(format!(
                "HTTP 403 from upstream: this needs the scopes '{wanted}'; run `mcp-stdio login {} --oauth-scope '{wanted}'`, or start the relay with --oauth",
                self.session.server
            ));
        }
        let _exclusive = self.session.exclusive().await;
        let step_up = Challenge {
            scope: Some(wanted),
            error: Some("insufficient_scope".into()),
            resource_metadata: challenge.resource_metadata,
        };
        let grant = self.session.login(Some(&step_up)).await?;
        let value = header_value(&grant);
        *current = Some(grant);
        Ok(value)
    }
}

/// The space-separated union of `held` and `more`, sorted, without repeats.
fn union(held: &str, more: &[&str]) -> String {
    let mut all: Vec<&str> = held
        .split_ascii_whitespace()
        .chain(more.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    all.join(" ")
}

/// `Bearer <token>`, marked sensitive so no HTTP layer logs it.
fn header_value(grant: &Grant) -> HeaderValue {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", grant.access_token.expose()))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer invalid"));
    value.set_sensitive(true);
    value
}
