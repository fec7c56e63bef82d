//! JWT access tokens (RFC 9068) from the configured issuer: the signature with a key from
//! its JWKS and an algorithm that key's type allows (never `none`, never HMAC), `iss`,
//! `aud` = this resource, `exp` and `nbf` with `--oauth-leeway`, a subject, and the scopes
//! `--oauth-scope` requires (`scope`, space-separated, or an `scp` array).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};

use super::claims::{Claims, Outcome};
use super::introspect::Introspector;
use super::token_kind::{KindCheck, not_an_access_token};
use super::{Caller, Refused, ResourceServerConfig};
use crate::jwks::{Key, Keys, Missing};
use crate::remembered::{Remembered, digest};

/// The longest an accepted token is taken on trust without checking it again.
const CACHE_FOR: Duration = Duration::from_secs(60);

pub struct Verifier {
    issuer: String,
    keys: Keys,
    validation: Validation,
    scopes: Vec<String>,
    /// Tokens accepted lately: a client sends the same token on every request, and a
    /// signature check costs tens of microseconds. An entry lives until the token
    /// expires, at most `CACHE_FOR`.
    accepted: Remembered<Caller>,
    /// Opaque tokens introspection called inactive, for `CACHE_FOR`: a token never becomes
    /// active again, so a client retrying a dead one costs the provider one question a
    /// minute.
    inactive: Remembered<()>,
    /// For tokens that are not JWTs, when `--introspection-url` is set.
    introspector: Option<Introspector>,
    audience: String,
    /// `--oauth-require-at-jwt`, `--oauth-no-id-token-check`.
    kind_check: KindCheck,
}

impl Verifier {
    pub fn new(config: ResourceServerConfig) -> Self {
        let issuer = config.issuer.as_str().to_owned();
        let validation = claim_checks(&issuer, &config.audience, config.leeway);
        let introspector = config
            .introspection
            .map(|introspection| Introspector::new(introspection, config.http.clone()));
        Self {
            introspector,
            audience: config.audience.clone(),
            kind_check: config.kind_check,
            keys: Keys::new(
                config.issuer,
                "--oauth-issuer",
                config.http,
                config.refetch_interval,
            ),
            issuer,
            validation,
            scopes: config.scopes,
            accepted: Remembered::new(config.token_cache),
            inactive: Remembered::new(config.token_cache),
        }
    }

    pub fn issuer(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }

    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The caller a token names, if the token is good for this resource.
    pub async fn verify(&self, token: &str) -> Result<Caller, Refused> {
        let key = self.accepted.is_enabled().then(|| digest(token));
        if let Some(key) = &key {
            if let Some(caller) = self.accepted.get(key) {
                return Ok(caller);
            }
            if self.inactive.get(key).is_some() {
                return Err(Refused::Invalid(Outcome::Inactive));
            }
        }
        let checked = self.check(token).await;
        if let Some(key) = key {
            match &checked {
                Ok((caller, exp)) => self.accepted.insert(key, caller.clone(), lifetime(*exp)),
                Err(Refused::Invalid(Outcome::Inactive)) => {
                    self.inactive.insert(key, (), CACHE_FOR)
                }
                Err(_) => {}
            }
        }
        checked.map(|(caller, _)| caller)
    }

    async fn check(&self, token: &str) -> Result<(Caller, u64), Refused> {
        let header = match decode_header(token) {
            Ok(header) => header,
            // Not a JWT: an opaque token, if there is someone to ask about it.
            Err(_) => {
                let Some(introspector) = &self.introspector else {
                    return Err(Refused::Invalid(Outcome::Malformed));
                };
                let claims = introspector
                    .introspect(token, &self.issuer, &self.audience, self.validation.leeway)
                    .await
                    .map_err(Refused::Invalid)?;
                let exp = claims.exp;
                return self.authorized(claims).map(|caller| (caller, exp));
            }
        };
        let keys = self
            .keys
            .for_kid(header.kid.as_deref())
            .await
            .map_err(|missing| {
                Refused::Invalid(match missing {
                    Missing::UnknownKey => Outcome::UnknownKey,
                    Missing::Unreachable(why) => {
                        tracing::warn!(%why, "cannot check tokens: the issuer's keys are unavailable");
                        Outcome::IssuerUnreachable
                    }
                })
            })?;
        let mut claims =
            signed_claims(token, header.alg, &keys, &self.validation).map_err(Refused::Invalid)?;
        claims.all = payload(token);
        if let Some(why) = not_an_access_token(
            header.typ.as_deref(),
            &claims,
            &self.issuer,
            self.kind_check,
        ) {
            tracing::info!(
                why,
                outcome = "not_an_access_token",
                "refused a token signed by the issuer that is not an access token"
            );
            return Err(Refused::Invalid(Outcome::NotAnAccessToken));
        }
        let exp = claims.exp;
        self.authorized(claims).map(|caller| (caller, exp))
    }

    fn authorized(&self, claims: Claims) -> Result<Caller, Refused> {
        if claims.sub.is_empty() {
            return Err(Refused::Invalid(Outcome::BadClaims));
        }
        let granted: HashSet<&str> = claims
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_ascii_whitespace()
            .chain(claims.scp.iter().flat_map(|scp| scp.iter()))
            .collect();
        if self.scopes.iter().any(|s| !granted.contains(s.as_str())) {
            return Err(Refused::InsufficientScope(self.scopes.clone()));
        }
        let identity = std::sync::Arc::new(claims.identity());
        Ok(Caller {
            principal: claims.sub,
            client_id: claims.client_id.or(claims.azp),
            identity,
        })
    }
}

/// The checks of a token that do not depend on the key: `iss` (with or without a trailing
/// slash), `aud`, the required claims, `exp` and `nbf` with `leeway`. The algorithm is set
/// per key by `signed_claims`.
pub fn claim_checks(issuer: &str, audience: &str, leeway: Duration) -> Validation {
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&[issuer, issuer.trim_end_matches('/')]);
    validation.set_audience(&[audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_nbf = true;
    validation.leeway = leeway.as_secs();
    validation
}

/// A JWT's claims, if one of `keys` whose type allows the header's algorithm `alg` verifies
/// its signature and the claims pass `checks`. The algorithm a key may verify comes from the
/// key, never from the token, so `none` and an HMAC keyed with a public key never pass.
pub fn signed_claims(
    token: &str,
    alg: Algorithm,
    keys: &[Arc<Key>],
    checks: &Validation,
) -> Result<Claims, Outcome> {
    let mut outcome = Outcome::WrongAlgorithm;
    for key in keys {
        if !key.algorithms.contains(&alg) {
            continue;
        }
        let mut validation = checks.clone();
        validation.algorithms = vec![alg];
        match decode::<Claims>(token, &key.decoding, &validation) {
            Ok(data) => return Ok(data.claims),
            Err(e) => outcome = outcome_of(e.kind()),
        }
        if outcome != Outcome::BadSignature {
            break; // the signature was good: the claims are what is wrong
        }
    }
    Err(outcome)
}

/// How long an accepted token with this `exp` is taken on trust: until it expires, at most
/// `CACHE_FOR`.
fn lifetime(exp: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Duration::from_secs(exp.saturating_sub(now)).min(CACHE_FOR)
}

fn outcome_of(kind: &ErrorKind) -> Outcome {
    match kind {
        ErrorKind::InvalidSignature => Outcome::BadSignature,
        ErrorKind::ExpiredSignature => Outcome::Expired,
        ErrorKind::ImmatureSignature => Outcome::NotYetValid,
        ErrorKind::InvalidIssuer => Outcome::WrongIssuer,
        ErrorKind::InvalidAudience => Outcome::WrongAudience,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Outcome::WrongAlgorithm,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => Outcome::BadClaims,
        ErrorKind::Json(_) => Outcome::BadClaims,
        _ => Outcome::Malformed,
    }
}

/// Every claim of a JWT whose signature was checked, as its payload says them (the
/// checked `Claims` keep only what the verifier acts on).
fn payload(token: &str) -> serde_json::Map<String, serde_json::Value> {
    use base64::Engine as _;
    token
        .split('.')
        .nth(1)
        .and_then(|part| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(part)
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accepted_token_is_trusted_until_it_expires_and_never_longer_than_cache_for() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        // A token that expired is remembered for no time at all.
        assert_eq!(lifetime(1), Duration::ZERO);
        assert_eq!(lifetime(now + 3600), CACHE_FOR);
        assert!(lifetime(now + 10) <= Duration::from_secs(10));
    }
}
