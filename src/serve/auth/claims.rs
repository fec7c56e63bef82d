//! What a token says and what checking it found: the claims the verifier acts on (from a
//! JWT or an introspection answer), and the outcome of a check, for the log and `/metrics`.

use serde::Deserialize;

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
    /// Introspection says the (opaque) token is not active.
    Inactive,
    /// The introspection endpoint could not be asked, or refused our credentials.
    IntrospectionUnavailable,
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
            Outcome::Inactive => "inactive",
            Outcome::IntrospectionUnavailable => "introspection_unavailable",
        }
    }
}

/// What a token says (a JWT's claims, or an introspection answer).
#[derive(Deserialize)]
pub struct Claims {
    pub sub: String,
    pub exp: u64,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub scp: Option<Vec<String>>,
    /// The client the token was issued to (RFC 9068 `client_id`; OpenID `azp`).
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub azp: Option<String>,
}
