//! JWT access tokens (RFC 9068) from the configured issuer: the signature with a key from
//! its JWKS and an algorithm that key's type allows (never `none`, never HMAC), `iss`,
//! `aud` = this resource, `exp` and `nbf` with `--oauth-leeway`, a subject, and the scopes
//! `--oauth-scope` requires (`scope`, space-separated, or an `scp` array).

use std::collections::HashSet;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde::Deserialize;

use super::jwks::{Keys, Missing};
use super::{Caller, Refused, ResourceServerConfig};

/// What a token check found, for the log and `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not the static token.
    Unknown,
    /// Not a JWT, or a header this server does not accept (`alg: none` included).
    Malformed,
    /// No key of the issuer has this key id (after a refetch).
    UnknownKey,
    /// An algorithm the key's type does not allow (an HMAC token against a public key).
    WrongAlgorithm,
    BadSignature,
    Expired,
    NotYetValid,
    WrongIssuer,
    WrongAudience,
    /// No `sub`, or a claim of the wrong type.
    BadClaims,
    /// The issuer's keys could not be fetched.
    IssuerUnreachable,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Unknown => "unknown_token",
            Outcome::Malformed => "malformed",
            Outcome::UnknownKey => "unknown_key",
            Outcome::WrongAlgorithm => "wrong_algorithm",
            Outcome::BadSignature => "bad_signature",
            Outcome::Expired => "expired",
            Outcome::NotYetValid => "not_yet_valid",
            Outcome::WrongIssuer => "wrong_issuer",
            Outcome::WrongAudience => "wrong_audience",
            Outcome::BadClaims => "bad_claims",
            Outcome::IssuerUnreachable => "issuer_unreachable",
        }
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Vec<String>>,
    /// The client the token was issued to (RFC 9068 `client_id`; OpenID `azp`).
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
}

pub struct Verifier {
    issuer: String,
    keys: Keys,
    validation: Validation,
    scopes: Vec<String>,
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
        Self {
            keys: Keys::new(config.issuer, config.http, config.refetch_interval),
            issuer,
            validation,
            scopes: config.scopes,
        }
    }

    pub fn issuer(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }

    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The token's subject, if the token is good for this resource.
    pub async fn verify(&self, token: &str) -> Result<Caller, Refused> {
        let header = decode_header(token).map_err(|_| Refused::Invalid(Outcome::Malformed))?;
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
                Ok(data) => return self.authorized(data.claims),
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
