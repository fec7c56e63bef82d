//! JWT access tokens (RFC 9068) from the configured issuer: the signature with a key from
//! its JWKS and an algorithm that key's type allows (never `none`, never HMAC), `iss`,
//! `aud` = this resource, `exp` and `nbf` with `--oauth-leeway`, a subject, and the scopes
//! `--oauth-scope` requires (`scope`, space-separated, or an `scp` array).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};

use super::claims::{Claims, Outcome};
use super::introspect::Introspector;
use super::jwks::{Keys, Missing};
use super::{Caller, Refused, ResourceServerConfig};

/// The longest an accepted token is taken on trust without checking it again.
const CACHE_FOR: Duration = Duration::from_secs(60);

pub struct Verifier {
    issuer: String,
    keys: Keys,
    validation: Validation,
    scopes: Vec<String>,
    /// Tokens accepted lately, by their SHA-256 (the token itself is not kept): a client
    /// sends the same token on every request, and a signature check costs tens of
    /// microseconds. An entry lives until the token expires, at most `CACHE_FOR`.
    accepted: Mutex<HashMap<[u8; 32], (Caller, Instant)>>,
    /// Opaque tokens introspection called inactive, by SHA-256, for `CACHE_FOR`: a token
    /// never becomes active again, so a client retrying a dead one costs the provider one
    /// question a minute. Bounded like `accepted`.
    inactive: Mutex<HashMap<[u8; 32], Instant>>,
    cache_size: usize,
    /// For tokens that are not JWTs, when `--introspection-url` is set.
    introspector: Option<Introspector>,
    audience: String,
    leeway: u64,
}

impl Verifier {
    pub fn new(config: ResourceServerConfig) -> Self {
        let issuer = config.issuer.as_str().to_owned();
        // Checks that do not depend on the key; the algorithm is set per key.
        let mut validation = Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.set_issuer(&[issuer.as_str(), issuer.trim_end_matches('/')]);
        validation.set_audience(&[config.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = config.leeway.as_secs();
        let introspector = config
            .introspection
            .map(|introspection| Introspector::new(introspection, config.http.clone()));
        Self {
            introspector,
            audience: config.audience.clone(),
            leeway: config.leeway.as_secs(),
            keys: Keys::new(config.issuer, config.http, config.refetch_interval),
            issuer,
            validation,
            scopes: config.scopes,
            accepted: Mutex::new(HashMap::new()),
            inactive: Mutex::new(HashMap::new()),
            cache_size: config.token_cache,
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
        let digest = self.cache_size.checked_sub(1).map(|_| {
            let hash = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
            <[u8; 32]>::try_from(hash.as_ref()).expect("SHA-256 is 32 bytes")
        });
        if let Some(digest) = &digest {
            if let Some((caller, until)) = self.accepted.lock().expect("cache lock").get(digest)
                && Instant::now() < *until
            {
                return Ok(caller.clone());
            }
            if self
                .inactive
                .lock()
                .expect("cache lock")
                .get(digest)
                .is_some_and(|until| Instant::now() < *until)
            {
                return Err(Refused::Invalid(Outcome::Inactive));
            }
        }
        let (caller, exp) = match self.check(token).await {
            Err(Refused::Invalid(Outcome::Inactive)) => {
                if let Some(digest) = digest {
                    self.remember_inactive(digest);
                }
                return Err(Refused::Invalid(Outcome::Inactive));
            }
            other => other?,
        };
        if let Some(digest) = digest {
            self.remember(digest, &caller, exp);
        }
        Ok(caller)
    }

    fn remember(&self, digest: [u8; 32], caller: &Caller, exp: u64) {
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let lives = Duration::from_secs(exp.saturating_sub(now_unix)).min(CACHE_FOR);
        let now = Instant::now();
        let mut accepted = self.accepted.lock().expect("cache lock");
        if accepted.len() >= self.cache_size {
            accepted.retain(|_, (_, until)| now < *until);
        }
        if accepted.len() >= self.cache_size
            && let Some(any) = accepted.keys().next().copied()
        {
            accepted.remove(&any);
        }
        accepted.insert(digest, (caller.clone(), now + lives));
    }

    fn remember_inactive(&self, digest: [u8; 32]) {
        let now = Instant::now();
        let mut inactive = self.inactive.lock().expect("cache lock");
        if inactive.len() >= self.cache_size {
            inactive.retain(|_, until| now < *until);
        }
        if inactive.len() >= self.cache_size
            && let Some(any) = inactive.keys().next().copied()
        {
            inactive.remove(&any);
        }
        inactive.insert(digest, now + CACHE_FOR);
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
                    .introspect(token, &self.issuer, &self.audience, self.leeway)
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
        let mut outcome = Outcome::WrongAlgorithm;
        for key in keys {
            if !key.algorithms.contains(&header.alg) {
                continue;
            }
            let mut validation = self.validation.clone();
            validation.algorithms = vec![header.alg];
            match decode::<Claims>(token, &key.decoding, &validation) {
                Ok(data) => {
                    let exp = data.claims.exp;
                    return self.authorized(data.claims).map(|caller| (caller, exp));
                }
                Err(e) => outcome = outcome_of(e.kind()),
            }
            if outcome != Outcome::BadSignature {
                break; // the signature was good: the claims are what is wrong
            }
        }
        Err(Refused::Invalid(outcome))
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
            .chain(claims.scp.iter().flatten().map(String::as_str))
            .collect();
        if self.scopes.iter().any(|s| !granted.contains(s.as_str())) {
            return Err(Refused::InsufficientScope(self.scopes.clone()));
        }
        Ok(Caller {
            principal: claims.sub,
            client_id: claims.client_id.or(claims.azp),
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(cache: usize) -> Verifier {
        Verifier::new(ResourceServerConfig {
            issuer: url::Url::parse("http://127.0.0.1:9").unwrap(),
            audience: "aud".into(),
            scopes: vec![],
            leeway: Duration::ZERO,
            refetch_interval: Duration::from_secs(30),
            token_cache: cache,
            introspection: None,
            http: crate::http::client::ClientOptions {
                connect_timeout: Duration::from_secs(1),
                read_timeout: None,
                extra_roots: vec![],
            },
        })
    }

    #[test]
    fn the_accepted_token_cache_stays_within_its_bound_and_the_tokens_lifetime() {
        let verifier = verifier(2);
        let caller = Caller {
            principal: "p".into(),
            client_id: None,
        };
        let far = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3600;
        for n in 0..5u8 {
            verifier.remember([n; 32], &caller, far);
        }
        assert_eq!(verifier.accepted.lock().unwrap().len(), 2);
        // A token that expired is remembered for no time at all.
        verifier.remember([9; 32], &caller, 1);
        let accepted = verifier.accepted.lock().unwrap();
        assert!(accepted[&[9; 32]].1 <= Instant::now());
        // And none for longer than CACHE_FOR.
        assert!(
            accepted
                .values()
                .all(|(_, until)| *until <= Instant::now() + CACHE_FOR)
        );
    }
}
