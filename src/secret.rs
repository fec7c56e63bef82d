//! A string that must never be shown (tokens, client secrets, PKCE verifiers, codes, the
//! serve bearer), and the constant-time comparison every check of one uses. On the ground
//! floor: the OAuth client and serve's bearer check both need it.

use serde::{Deserialize, Serialize};

/// Holds a secret. `Debug` prints `<redacted>` and there is no `Display`, so a secret can
/// only reach a log or an error by an explicit `expose()`, which is easy to review.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Compares a value from the network with our secret in constant time.
pub fn matches(received: &str, expected: &Secret) -> bool {
    #[allow(deprecated)] // still the crate's constant-time comparison
    aws_lc_rs::constant_time::verify_slices_are_equal(
        received.as_bytes(),
        expected.expose().as_bytes(),
    )
    .is_ok()
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value_but_serde_keeps_it() {
        let secret = Secret::new("tok-123");
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"tok-123\"");
    }

    #[test]
    fn matches_only_the_same_bytes() {
        let state = Secret::new("abc");
        assert!(matches("abc", &state));
        assert!(!matches("abd", &state));
        assert!(!matches("ab", &state));
        assert!(!matches("abcd", &state));
    }
}
