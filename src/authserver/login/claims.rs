//! Which id_token claims may name a user: a stable subject as it is, an email only once the
//! provider says it verified it, anything else only when the operator vouches for it.

use serde_json::{Map, Value};

/// What kind of evidence a `--principal-claim` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalKind {
    /// The provider's own identifier for the user, which the user cannot change: `sub`, and
    /// Microsoft Entra's `oid`.
    Stable,
    /// `email`: believed only with `email_verified`.
    Email,
    /// Anything else (`preferred_username`, `upn`, `name`, …): many providers let users set
    /// it, and nothing says it was checked.
    Unverifiable,
}

pub fn principal_kind(claim: &str) -> PrincipalKind {
    match claim {
        "sub" | "oid" => PrincipalKind::Stable,
        "email" => PrincipalKind::Email,
        _ => PrincipalKind::Unverifiable,
    }
}

/// Whether the provider says it verified the user's email: the boolean `true`, or the
/// string `"true"` (Amazon Cognito's UserInfo writes booleans as strings). A missing claim
/// (Microsoft Entra sends none) and every other value, the string `"false"` included, are
/// not a verification.
pub fn email_verified(claims: &Map<String, Value>) -> bool {
    match claims.get("email_verified") {
        Some(Value::Bool(verified)) => *verified,
        Some(Value::String(text)) => text == "true",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn only_true_is_verified() {
        assert!(email_verified(&claims(json!({"email_verified": true}))));
        assert!(email_verified(&claims(json!({"email_verified": "true"}))));
        for unverified in [
            json!({}),
            json!({"email_verified": false}),
            json!({"email_verified": "false"}),
            json!({"email_verified": "TRUE"}),
            json!({"email_verified": 1}),
            json!({"email_verified": null}),
        ] {
            assert!(!email_verified(&claims(unverified.clone())), "{unverified}");
        }
    }

    #[test]
    fn subjects_are_stable_and_names_are_not() {
        assert_eq!(principal_kind("sub"), PrincipalKind::Stable);
        assert_eq!(principal_kind("oid"), PrincipalKind::Stable);
        assert_eq!(principal_kind("email"), PrincipalKind::Email);
        for claim in ["preferred_username", "upn", "name", "nickname"] {
            assert_eq!(principal_kind(claim), PrincipalKind::Unverifiable);
        }
    }
}
