//! `private_key_jwt` client authentication (RFC 7523 §2.2): a short-lived JWT signed with the
//! client's P-256 key (ES256), sent as `client_assertion`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;

use super::pkce::random_token;
use crate::secret::Secret;

pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A client's signing key, read from a PKCS#8 PEM file (`--client-key`).
pub struct ClientKey {
    pair: aws_lc_rs::signature::EcdsaKeyPair,
}

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientKey(<redacted>)")
    }
}

impl ClientKey {
    pub fn from_pem(pem: &[u8]) -> Result<ClientKey, String> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem).map_err(|_| {
            "--client-key: not a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----)".to_owned()
        })?;
        let pair = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
        )
        .map_err(|_| "--client-key: only P-256 (ES256) keys are supported".to_owned())?;
        Ok(ClientKey { pair })
    }

    /// A fresh assertion: `iss` and `sub` the client id, `aud` the authorization server,
    /// valid for five minutes, with a random `jti` so it cannot be replayed.
    pub fn assertion(&self, client_id: &str, audience: &str, now: u64) -> Result<Secret, String> {
        let header = json!({"alg": "ES256", "typ": "JWT"});
        let claims = json!({
            "iss": client_id, "sub": client_id, "aud": audience,
            "iat": now, "exp": now + 300, "jti": random_token(16).expose(),
        });
        sign_es256(&self.pair, &header, &claims)
            .map_err(|_| "could not sign the client assertion".to_owned())
    }
}

/// A compact JWS of `header` and `claims` signed with `pair` (ES256): the client
/// assertion's and a DPoP proof's.
pub(super) fn sign_es256(
    pair: &aws_lc_rs::signature::EcdsaKeyPair,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> Result<Secret, aws_lc_rs::error::Unspecified> {
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = pair.sign(
        &aws_lc_rs::rand::SystemRandom::new(),
        signing_input.as_bytes(),
    )?;
    Ok(Secret::new(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, KeyPair, UnparsedPublicKey};

    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgevZzL1gdAFr88hb2
OF/2NxApJCzGCEDdfSp6VQO30hyhRANCAAQRWz+jn65BtOMvdyHKcvjBeBSDZH2r
1RTwjmYSi9R/zpBnuQ4EiMnCqfMPWiZqB4QdbAd0E7oH50VpuZ1P087G
-----END PRIVATE KEY-----";

    #[test]
    fn signs_a_verifiable_es256_assertion() {
        let key = ClientKey::from_pem(KEY.as_bytes()).unwrap();
        let jwt = key
            .assertion("client-1", "https://as.example.com", 1000)
            .unwrap();
        let parts: Vec<&str> = jwt.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-1");
        assert_eq!(claims["aud"], "https://as.example.com");
        assert_eq!(claims["exp"], 1300);
        let public =
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.pair.public_key().as_ref());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(
                signed.as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).unwrap(),
            )
            .unwrap();
        assert_eq!(format!("{key:?}"), "ClientKey(<redacted>)");
    }

    #[test]
    fn other_keys_are_refused_with_a_reason() {
        assert!(
            ClientKey::from_pem(b"nonsense")
                .unwrap_err()
                .contains("PKCS#8")
        );
    }
}
