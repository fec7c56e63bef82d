//! An authorization server's signing keys (for resource-server mode's access tokens and
//! `--login-oidc`'s id_tokens): its metadata (RFC 8414, then OpenID Connect
//! discovery) names `jwks_uri`; the key set is fetched once and kept, and a token signed
//! with a key id the set does not have triggers one refetch, at most every
//! `--oauth-jwks-refetch` seconds (key rotation without a restart, and no amplification of
//! a flood of made-up key ids). Symmetric keys and encryption keys are never used.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use url::Url;

use crate::oauth::http::OAuthHttp;
use crate::oauth::wellknown;

/// The largest metadata or key-set document read.
const MAX_DOCUMENT: usize = 256 * 1024;

/// One verification key and the algorithms it may verify (decided by its type, never by
/// a token's header).
pub struct Key {
    pub decoding: DecodingKey,
    pub algorithms: Vec<Algorithm>,
}

/// A JWKS document's usable keys, by key id.
#[derive(Default)]
pub struct KeySet {
    by_kid: HashMap<String, Arc<Key>>,
    /// Keys without a `kid`, tried for tokens without one.
    unnamed: Vec<Arc<Key>>,
}

pub struct Keys {
    issuer: Url,
    flag: &'static str,
    http: OAuthHttp,
    refetch_interval: Duration,
    current: RwLock<Arc<KeySet>>,
    /// Held while fetching, so concurrent misses fetch once; `None` before the first fetch.
    fetched: tokio::sync::Mutex<Option<Instant>>,
    jwks_uri: std::sync::OnceLock<Url>,
}

/// Why no key could be found.
#[derive(Debug)]
pub enum Missing {
    /// The set (fresh enough) has no such key.
    UnknownKey,
    /// The authorization server could not be asked.
    Unreachable(String),
}

impl Keys {
    /// `flag` names where `issuer` came from (for errors).
    pub fn new(
        issuer: Url,
        flag: &'static str,
        http: crate::http::client::ClientOptions,
        refetch_interval: Duration,
    ) -> Self {
        Self {
            issuer,
            flag,
            http: OAuthHttp::new(http, MAX_DOCUMENT),
            refetch_interval,
            current: RwLock::new(Arc::default()),
            fetched: tokio::sync::Mutex::new(None),
            jwks_uri: std::sync::OnceLock::new(),
        }
    }

    /// The keys a token with this `kid` may have been signed with.
    pub async fn for_kid(&self, kid: Option<&str>) -> Result<Vec<Arc<Key>>, Missing> {
        if let Some(keys) = self.lookup(kid) {
            return Ok(keys);
        }
        let mut fetched = self.fetched.lock().await;
        // Someone else may have fetched while we waited.
        if let Some(keys) = self.lookup(kid) {
            return Ok(keys);
        }
        if fetched.is_some_and(|at| at.elapsed() < self.refetch_interval) {
            return Err(Missing::UnknownKey);
        }
        *fetched = Some(Instant::now());
        let set = self.fetch().await.map_err(Missing::Unreachable)?;
        *self.current.write().expect("keys lock") = Arc::new(set);
        self.lookup(kid).ok_or(Missing::UnknownKey)
    }

    fn lookup(&self, kid: Option<&str>) -> Option<Vec<Arc<Key>>> {
        let set = self.current.read().expect("keys lock").clone();
        set.lookup(kid)
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let jwks_uri = match self.jwks_uri.get() {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                self.jwks_uri.get_or_init(|| uri).clone()
            }
        };
        let fetched = self.http.get_json(&jwks_uri).await?;
        if !fetched.status.is_success() {
            return Err(format!(
                "the authorization server's key set answered HTTP {}",
                fetched.status
            ));
        }
        let set = KeySet::parse(&fetched.body)?;
        tracing::info!(
            keys = set.by_kid.len() + set.unnamed.len(),
            "fetched the authorization server's signing keys"
        );
        Ok(set)
    }

    /// `jwks_uri` from the issuer's metadata.
    async fn discover(&self) -> Result<Url, String> {
        let metadata =
            crate::oauth::discovery::server_metadata(&self.http, &self.issuer, self.flag).await?;
        let uri = metadata["jwks_uri"]
            .as_str()
            .ok_or("the authorization server metadata has no jwks_uri")?;
        wellknown::checked(uri, "jwks_uri")
    }
}

impl KeySet {
    /// The usable signing keys of a JWKS document; keys that cannot be used are skipped.
    pub fn parse(body: &[u8]) -> Result<KeySet, String> {
        #[derive(Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let document: Document = serde_json::from_slice(body)
            .map_err(|e| format!("the authorization server's key set is not a JWKS ({e})"))?;
        let mut set = KeySet::default();
        for value in document.keys {
            let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
                continue;
            };
            let Some(key) = usable(&jwk) else {
                continue;
            };
            let key = Arc::new(key);
            match jwk.common.key_id {
                Some(kid) => {
                    set.by_kid.insert(kid, key);
                }
                None => set.unnamed.push(key),
            }
        }
        Ok(set)
    }

    /// The key named `kid`, or for a token that names none, every key without a name.
    pub fn lookup(&self, kid: Option<&str>) -> Option<Vec<Arc<Key>>> {
        match kid {
            Some(kid) => self.by_kid.get(kid).map(|key| vec![key.clone()]),
            None => (!self.unnamed.is_empty()).then(|| self.unnamed.clone()),
        }
    }
}

/// A signing key with the algorithms its type allows (narrowed to its `alg` if it names
/// one); `None` for symmetric keys, encryption keys and unsupported types.
fn usable(jwk: &Jwk) -> Option<Key> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let by_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        // A symmetric key in a public key set is never a verification key here: accepting
        // it would let anyone who read the set sign tokens.
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        Some(named) => {
            let named = Algorithm::try_from(named).ok()?;
            by_type.into_iter().filter(|a| *a == named).collect()
        }
        None => by_type,
    };
    if algorithms.is_empty() {
        return None;
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        decoding,
        algorithms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_signing_keys_are_kept() {
        let body = serde_json::json!({"keys": [
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "EC", "kid": "ec", "crv": "P-256", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "kid": "sig", "crv": "P-256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "kid": "mislabelled", "crv": "P-256", "alg": "HS256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "nonsense"}
        ]});
        let set = KeySet::parse(body.to_string().as_bytes()).unwrap();
        let kids: Vec<&String> = set.by_kid.keys().collect();
        assert_eq!(kids, ["sig"]);
        assert_eq!(set.by_kid["sig"].algorithms, [Algorithm::ES256]);
        assert!(set.unnamed.is_empty());
    }
}
