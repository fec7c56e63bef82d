//! Opaque access tokens (RFC 7662): a token that is not a JWT is sent to the authorization
//! server's introspection endpoint with this resource's client credentials (HTTP Basic),
//! and its answer checked as a JWT's claims would be: `active`, `iss` when given, an `aud`
//! (or `resource`) that names this server (required: a token the same authorization server
//! issued for another resource must not work here), `exp`/`nbf` with the leeway, a `sub`. What the verifier then does with it (the
//! scopes, the cache) is the same for both kinds of token.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use url::Url;

use super::claims::{Audience, Claims, Outcome};
use crate::oauth::http::{BasicAuth, OAuthHttp};
use crate::secret::Secret;

/// The largest introspection answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// `--introspection-url` and the credentials from the environment.
#[derive(Debug, Clone)]
pub struct IntrospectionConfig {
    pub url: Url,
    pub client_id: String,
    pub client_secret: Secret,
    /// `--introspection-concurrency`.
    pub concurrency: usize,
    /// `--introspection-without-audience`: the authorization server never says which
    /// resource a token is for, and the operator accepts that.
    pub audience_optional: bool,
}

pub struct Introspector {
    config: IntrospectionConfig,
    http: OAuthHttp,
    /// At most this many questions to the endpoint at once (`--introspection-concurrency`):
    /// a flood of made-up tokens waits here instead of flooding the provider.
    in_flight: tokio::sync::Semaphore,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    active: bool,
    sub: Option<String>,
    aud: Option<Audience>,
    /// Some authorization servers name the resource here instead of in `aud`.
    resource: Option<Audience>,
    iss: Option<String>,
    exp: Option<u64>,
    nbf: Option<u64>,
    scope: Option<String>,
    client_id: Option<String>,
}

impl Introspector {
    pub fn new(config: IntrospectionConfig, http: crate::http::client::ClientOptions) -> Self {
        Self {
            in_flight: tokio::sync::Semaphore::new(config.concurrency.max(1)),
            config,
            http: OAuthHttp::new(http, MAX_ANSWER),
        }
    }

    /// The token's claims, if the authorization server says it is active and for us.
    pub async fn introspect(
        &self,
        token: &str,
        issuer: &str,
        audience: &str,
        leeway: u64,
    ) -> Result<Claims, Outcome> {
        let basic = BasicAuth {
            client_id: &self.config.client_id,
            client_secret: self.config.client_secret.expose(),
        };
        let form = [("token", token), ("token_type_hint", "access_token")];
        let _turn = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| Outcome::IntrospectionUnavailable)?;
        let fetched = self
            .http
            .post_form(&self.config.url, &form, Some(basic))
            .await
            .map_err(|why| {
                tracing::warn!(%why, "cannot check an opaque token: the introspection endpoint is unavailable");
                Outcome::IntrospectionUnavailable
            })?;
        if !fetched.status.is_success() {
            tracing::warn!(status = %fetched.status, "the introspection endpoint refused this resource's request (check MCP_STDIO_INTROSPECTION_CLIENT_ID and _SECRET)");
            return Err(Outcome::IntrospectionUnavailable);
        }
        let answer: Answer = serde_json::from_slice(&fetched.body).map_err(|_| {
            tracing::warn!("the introspection answer is not JSON");
            Outcome::IntrospectionUnavailable
        })?;
        if !answer.active {
            return Err(Outcome::Inactive);
        }
        if let Some(iss) = &answer.iss
            && iss.trim_end_matches('/') != issuer.trim_end_matches('/')
        {
            return Err(Outcome::WrongIssuer);
        }
        match (&answer.aud, &answer.resource) {
            (None, None) if self.config.audience_optional => {}
            (None, None) => {
                tracing::info!(
                    "an introspection answer named no audience (aud or resource); refused (--introspection-without-audience accepts such answers)"
                );
                return Err(Outcome::WrongAudience);
            }
            (aud, resource) => {
                let named = |a: &Option<Audience>| a.as_ref().is_some_and(|a| a.contains(audience));
                if !named(aud) && !named(resource) {
                    return Err(Outcome::WrongAudience);
                }
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if answer.exp.is_some_and(|exp| exp + leeway <= now) {
            return Err(Outcome::Expired);
        }
        if answer.nbf.is_some_and(|nbf| nbf > now + leeway) {
            return Err(Outcome::NotYetValid);
        }
        let sub = answer
            .sub
            .filter(|s| !s.is_empty())
            .ok_or(Outcome::BadClaims)?;
        Ok(Claims {
            sub,
            // No expiry given: the cache's own bound (60 s) is the limit.
            exp: answer.exp.unwrap_or(u64::MAX),
            scope: answer.scope,
            scp: None,
            client_id: answer.client_id,
            azp: None,
            signs: Default::default(),
            // The answer is the token's claims (RFC 7662 §2.2), `active` among them.
            all: serde_json::from_slice(&fetched.body).unwrap_or_default(),
        })
    }
}
