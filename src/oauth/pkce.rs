//! PKCE (RFC 7636, S256 only), the `state` value, and comparing them without leaking timing.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::secret::Secret;

/// A PKCE pair: the verifier stays in memory and goes only to the token endpoint; the
/// challenge goes in the authorization URL.
pub struct Pkce {
    pub verifier: Secret,
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair: a verifier of 64 random bytes (86 characters, inside RFC 7636's 43–128)
    /// and its S256 challenge.
    pub fn generate() -> Pkce {
        let verifier = random_token(64);
        let challenge = challenge_for(verifier.expose());
        Pkce {
            verifier,
            challenge,
        }
    }
}

/// `BASE64URL(SHA256(verifier))`, RFC 7636 §4.2.
pub fn challenge_for(verifier: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// A random URL-safe value of `bytes` random bytes (`state`: 32 bytes, 43 characters).
pub fn random_token(bytes: usize) -> Secret {
    let mut raw = vec![0u8; bytes];
    aws_lc_rs::rand::fill(&mut raw).expect("the system random generator works");
    Secret::new(URL_SAFE_NO_PAD.encode(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_7636_example_challenge() {
        assert_eq!(
            challenge_for("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn fresh_values_have_the_right_shape_and_differ() {
        let a = Pkce::generate();
        let b = Pkce::generate();
        assert_eq!(a.verifier.expose().len(), 86);
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.challenge, challenge_for(a.verifier.expose()));
        assert_eq!(random_token(32).expose().len(), 43);
    }
}
