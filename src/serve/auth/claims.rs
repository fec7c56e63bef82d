//! What a token says and what checking it found: the claims the verifier acts on (from a
//! JWT or an introspection answer), and the outcome of a check, for the log and `/metrics`.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::policy::Principal;

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
    /// Signed by the issuer but not an access token (an id_token, `token_kind.rs`).
    NotAnAccessToken,
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
            Outcome::NotAnAccessToken => "not_an_access_token",
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
    /// Okta sends an array, Microsoft Entra one space-separated string.
    #[serde(default)]
    pub scp: Option<Scopes>,
    /// The client the token was issued to (RFC 9068 `client_id`; OpenID `azp`).
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub azp: Option<String>,
    /// What tells an id_token from an access token.
    #[serde(flatten)]
    pub signs: Signs,
    /// Every claim as the token carries it, for the policy (filled by whoever read the
    /// token: the JWT's payload, the introspection answer).
    #[serde(skip)]
    pub all: Map<String, Value>,
}

impl Claims {
    /// What a policy rule sees of this token's caller: its `sub`, every claim, its scopes
    /// (`scope` or `scp`), and its groups (a `groups` claim, a list or one
    /// space-separated string).
    pub fn identity(&self) -> Principal {
        let scopes = self
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_ascii_whitespace()
            .chain(self.scp.iter().flat_map(|scp| scp.iter()))
            .map(str::to_owned)
            .collect();
        let groups = match self.all.get("groups") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(text)) => text.split_ascii_whitespace().map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        Principal::new(
            Some(self.sub.clone()),
            Value::Object(self.all.clone()),
            scopes,
            None,
            groups,
        )
    }
}

/// What a policy rule sees of a caller of the embedded authorization server: the user it
/// signed in (by the trusted header, `--dev-user` or `--login-oidc`), the groups the
/// proxy said at consent (`--trusted-groups-header`), and the grant's client and scopes
/// as claims.
pub fn embedded_identity(user: &str, client_id: &str, scope: &str, groups: &[String]) -> Principal {
    let claims = serde_json::json!({
        "sub": user,
        "client_id": client_id,
        "scope": scope,
        "groups": groups,
    });
    Principal::new(
        Some(user.to_owned()),
        claims,
        scope.split_ascii_whitespace().map(str::to_owned).collect(),
        Some(user.to_owned()),
        groups.to_vec(),
    )
}

/// An `scp` claim: a list, or a space-separated string.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Scopes {
    List(Vec<String>),
    Text(String),
}

impl Scopes {
    pub fn iter(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            Scopes::List(list) => Box::new(list.iter().map(String::as_str)),
            Scopes::Text(text) => Box::new(text.split_ascii_whitespace()),
        }
    }
}

/// The claims that tell an id_token from an access token.
#[derive(Deserialize, Default)]
pub struct Signs {
    #[serde(default)]
    pub(super) at_hash: Option<IgnoredAny>,
    #[serde(default)]
    pub(super) c_hash: Option<IgnoredAny>,
    #[serde(default)]
    pub(super) s_hash: Option<IgnoredAny>,
    #[serde(default)]
    pub(super) nonce: Option<IgnoredAny>,
    /// Keycloak's token type (`Bearer`, `ID`, `Refresh`); any JSON, since another
    /// provider's claim of that name may not be text.
    #[serde(default)]
    pub(super) typ: Option<serde_json::Value>,
    /// Amazon Cognito's token type (`access`, `id`).
    #[serde(default)]
    pub(super) token_use: Option<serde_json::Value>,
    /// Claims only access tokens carry (besides `scope`, `scp` and `client_id`, which
    /// `Claims` reads itself).
    #[serde(default)]
    pub(super) roles: Option<IgnoredAny>,
    #[serde(default)]
    pub(super) cid: Option<IgnoredAny>,
    #[serde(default)]
    pub(super) appid: Option<IgnoredAny>,
    #[serde(default)]
    pub(super) aud: Option<Audience>,
}

/// An `aud`: one string or a list (RFC 7519 §4.1.3), in a JWT or an introspection answer.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    pub(super) fn contains(&self, wanted: &str) -> bool {
        match self {
            Audience::One(one) => one == wanted,
            Audience::Many(many) => many.iter().any(|a| a == wanted),
        }
    }

    pub(super) fn only(&self) -> Option<&str> {
        match self {
            Audience::One(one) => Some(one),
            Audience::Many(many) if many.len() == 1 => Some(&many[0]),
            Audience::Many(_) => None,
        }
    }
}
