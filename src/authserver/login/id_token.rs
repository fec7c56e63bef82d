//! Verifying the provider's id_token (OpenID Connect Core §3.1.3.7): the signature with
//! one of the provider's keys (fetched and rotated by `jwks`, algorithms by
//! key type, never `none` or HMAC), `iss` exactly the provider, `aud` our client id (and
//! `azp` when there are several audiences), `exp` with a small leeway, and `nonce` the one
//! this sign-in sent.

use std::time::Duration;

use jsonwebtoken::Validation;
use serde_json::{Map, Value};

use super::LoginConfig;
use crate::jwks::{Keys, Missing};

const LEEWAY_S: u64 = 60;

pub struct Verifier {
    keys: Keys,
    issuer: String,
    client_id: String,
}

impl Verifier {
    pub fn new(config: &LoginConfig) -> Self {
        Verifier {
            keys: Keys::new(
                config.issuer.clone(),
                "--login-oidc",
                config.http.clone(),
                Duration::from_secs(30),
            ),
            issuer: config.issuer.as_str().to_owned(),
            client_id: config.client_id.clone(),
        }
    }

    pub async fn verify(&self, token: &str, nonce: &str) -> Result<Map<String, Value>, String> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| "the id_token is not a JWT".to_owned())?;
        let keys =
            self.keys
                .for_kid(header.kid.as_deref())
                .await
                .map_err(|missing| match missing {
                    Missing::UnknownKey => {
                        "the id_token is signed with a key the identity provider does not publish"
                            .to_owned()
                    }
                    Missing::Unreachable(why) => {
                        format!("cannot fetch the identity provider's keys: {why}")
                    }
                })?;
        let mut last = "the id_token's signature does not verify".to_owned();
        for key in keys {
            if !key.algorithms.contains(&header.alg) {
                last = "the id_token uses an algorithm its key does not allow".into();
                continue;
            }
            let mut validation = Validation::new(header.alg);
            validation.algorithms = key.algorithms.clone();
            validation.leeway = LEEWAY_S;
            let issuers = [self.issuer.as_str(), self.issuer.trim_end_matches('/')];
            validation.set_issuer(&issuers);
            validation.set_audience(&[self.client_id.as_str()]);
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation) {
                Ok(data) => return self.check_claims(data.claims, nonce),
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind;
                    last = match e.kind() {
                        ErrorKind::ExpiredSignature => "the id_token has expired".into(),
                        ErrorKind::InvalidIssuer => "the id_token names another issuer".into(),
                        ErrorKind::InvalidAudience => "the id_token is for another client".into(),
                        ErrorKind::InvalidSignature => {
                            "the id_token's signature does not verify".into()
                        }
                        _ => "the id_token is not valid".into(),
                    };
                }
            }
        }
        Err(last)
    }

    fn check_claims(
        &self,
        claims: Map<String, Value>,
        nonce: &str,
    ) -> Result<Map<String, Value>, String> {
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err("the id_token's nonce is not this sign-in's".into());
        }
        if claims
            .get("aud")
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() > 1)
            && claims.get("azp").and_then(Value::as_str) != Some(self.client_id.as_str())
        {
            return Err("the id_token has several audiences and its azp is not this client".into());
        }
        Ok(claims)
    }
}
