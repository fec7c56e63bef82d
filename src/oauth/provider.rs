//! The relay's source of `Authorization` values: the stored grant, refreshed ahead of
//! expiry, refreshed (once) after a 401, and replaced by a new login when the grant is dead
//! and a browser login is allowed. One refresh or login at a time: concurrent requests that
//! all met a 401 share it.

use super::challenge::Challenge;
use super::flow::ServerAuth;
use super::presented::{Presented, ServerNonce};
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
    current: tokio::sync::Mutex<Option<Held>>,
    /// The resource server's latest DPoP nonce, for the next proof.
    rs_nonce: ServerNonce,
}

/// The grant in use, and how requests present it (its DPoP key read once).
struct Held {
    grant: Grant,
    presented: Presented,
}

impl Held {
    fn new(grant: Grant) -> Held {
        let presented = Presented::of(&grant);
        Held { grant, presented }
    }
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
            current: tokio::sync::Mutex::new(stored.map(Held::new)),
            rs_nonce: ServerNonce::default(),
        }
    }

    /// The server's login state this provider draws on (its stored grant, its settings).
    pub fn server_auth(&self) -> &ServerAuth {
        &self.session
    }

    /// How the next request presents the login; `None` before any login (the server's
    /// 401 then starts one). Refreshes first when the token is about to expire.
    pub async fn authorization(&self) -> Option<Presented> {
        let mut current = self.current.lock().await;
        let grant = &current.as_ref()?.grant;
        let leeway = self.session.settings.refresh_leeway.as_secs();
        if needs_refresh(grant, unix_now(), leeway) && grant.refresh_token.is_some() {
            let _exclusive = self.session.exclusive().await;
            // Another process may have refreshed while we waited: its grant is on disk.
            if let Ok(Some(stored)) = self.session.stored()
                && stored.access_token != grant.access_token
                && !needs_refresh(&stored, unix_now(), leeway)
            {
                *current = Some(Held::new(stored));
                return current.as_ref().map(|held| held.presented.clone());
            }
            let grant = grant.clone();
            match self.session.refresh(&grant).await {
                Ok(fresh) => *current = Some(Held::new(fresh)),
                Err(TokenFailure::Passing(e)) => {
                    tracing::warn!("could not refresh the access token ahead of expiry: {e}");
                }
                Err(TokenFailure::Dead(e)) => {
                    tracing::warn!("the stored login is no longer valid: {e}");
                    *current = None;
                }
            }
        }
        current.as_ref().map(|held| held.presented.clone())
    }

    /// Called after a 401 to a request that carried `sent`. Returns the value to retry
    /// with, or the message the host should see.
    pub async fn after_unauthorized(
        &self,
        sent: Option<&Presented>,
        challenge: Option<Challenge>,
    ) -> Result<Presented, String> {
        let mut current = self.current.lock().await;
        // Another request already replaced the token that was refused: use the new one.
        if let Some(held) = current.as_ref()
            && sent != Some(&held.presented)
        {
            return Ok(held.presented.clone());
        }
        // From here on one process at a time: another relay may be refreshing or logging in.
        let _exclusive = self.session.exclusive().await;
        // The disk may hold a newer grant (a `login` in another terminal, another relay).
        if let Ok(Some(stored)) = self.session.stored() {
            let held = Held::new(stored);
            if Some(&held.presented) != sent {
                let value = held.presented.clone();
                *current = Some(held);
                return Ok(value);
            }
        }
        if let Some(grant) = current.as_ref().map(|held| held.grant.clone())
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
        if let Some(grant) = current.as_ref().map(|held| held.grant.clone())
            && grant.refresh_token.is_some()
        {
            match self.session.refresh(&grant).await {
                Ok(fresh) => {
                    let held = Held::new(fresh);
                    let value = held.presented.clone();
                    *current = Some(held);
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
        let held = Held::new(grant);
        let value = held.presented.clone();
        *current = Some(held);
        Ok(value)
    }
}

impl TokenProvider {
    /// Called after `403 insufficient_scope`: logs in again asking for the union of the
    /// scopes held and the scopes the challenge names (2026-07-28 step-up), once per set.
    pub async fn after_insufficient_scope(
        &self,
        sent: Option<&Presented>,
        challenge: Challenge,
    ) -> Result<Presented, String> {
        let mut current = self.current.lock().await;
        if let Some(held) = current.as_ref()
            && sent != Some(&held.presented)
        {
            return Ok(held.presented.clone()); // someone already stepped up
        }
        let held = current
            .as_ref()
            .and_then(|held| held.grant.scope.clone())
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
            dpop: challenge.dpop,
            bearer: challenge.bearer,
        };
        let grant = self.session.login(Some(&step_up)).await?;
        let held = Held::new(grant);
        let value = held.presented.clone();
        *current = Some(held);
        Ok(value)
    }
}

impl TokenProvider {
    /// Puts `presented` into a request's headers, with a DPoP proof for `method` on `uri`
    /// carrying the resource server's latest nonce when the token is bound.
    pub fn stamp(
        &self,
        presented: &Presented,
        headers: &mut http::HeaderMap,
        method: &str,
        uri: &http::Uri,
    ) {
        self.rs_nonce.stamp(presented, headers, method, uri);
    }

    /// Reads a resource server's answer to a request that presented `presented`; true
    /// when it asked for a (new) DPoP nonce, worth one more try (RFC 9449 §9).
    pub fn note_answer(
        &self,
        presented: &Presented,
        status: u16,
        headers: &http::HeaderMap,
    ) -> bool {
        self.rs_nonce.note(presented, status, headers)
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
