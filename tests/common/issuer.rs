//! A fake authorization server on 127.0.0.1:0 for resource-server tests: RFC 8414 metadata
//! naming a JWKS, the JWKS itself (its keys can be rotated), a count of JWKS fetches, and
//! tokens minted with ES256 the way an identity provider would (or deliberately wrong).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

/// An EC P-256 signing key with its id.
pub struct SigningKey {
    pub kid: String,
    encoding: EncodingKey,
    public: Value,
}

impl SigningKey {
    pub fn generate(kid: &str) -> Self {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        // The uncompressed point: 0x04 || X || Y.
        let point = pair.public_key().as_ref();
        let public = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        Self {
            kid: kid.to_owned(),
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            public,
        }
    }

    /// The public JWK, as the key set publishes it.
    pub fn jwk(&self) -> Value {
        self.public.clone()
    }

    /// A token with these claims, signed with this key under `kid` (its own by default).
    pub fn sign(&self, claims: &Value, kid: Option<&str>) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.unwrap_or(&self.kid).to_owned());
        encode(&header, claims, &self.encoding).unwrap()
    }

    /// A token with these claims under the JOSE header `typ` (`at+jwt` for RFC 9068).
    pub fn sign_typed(&self, claims: &Value, typ: &str) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = Some(typ.to_owned());
        encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The introspection endpoint's client, as the resource server must present it.
pub const INTROSPECTION_CLIENT: (&str, &str) = ("serve-rs", "introspection-secret-0123456789");

pub struct Issuer {
    pub url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    jwks_fetches: Arc<AtomicUsize>,
    /// Opaque token → its introspection answer (tokens not here are inactive).
    opaque: Arc<Mutex<std::collections::HashMap<String, Value>>>,
    introspections: Arc<AtomicUsize>,
    /// How long each introspection answer takes, and the most that were in flight at once.
    introspection_delay_ms: Arc<std::sync::atomic::AtomicU64>,
    most_in_flight: Arc<AtomicUsize>,
    _server: tokio::task::JoinHandle<()>,
}

impl Issuer {
    /// Publishes `keys` (their public halves).
    pub async fn start(keys: &[&SigningKey]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let published = Arc::new(Mutex::new(keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()));
        let fetches = Arc::new(AtomicUsize::new(0));
        let metadata = json!({
            "issuer": url,
            "jwks_uri": format!("{url}/jwks"),
            "authorization_endpoint": format!("{url}/authorize"),
            "token_endpoint": format!("{url}/token"),
            "code_challenge_methods_supported": ["S256"],
        });
        let (keys_for_route, fetches_for_route) = (published.clone(), fetches.clone());
        let opaque = Arc::new(Mutex::new(std::collections::HashMap::<String, Value>::new()));
        let introspections = Arc::new(AtomicUsize::new(0));
        let (opaque_for_route, introspections_for_route) = (opaque.clone(), introspections.clone());
        let delay = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let now_in_flight = Arc::new(AtomicUsize::new(0));
        let (delay_for_route, most_for_route) = (delay.clone(), most.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                get(move || async move { axum::Json(metadata) }),
            )
            .route(
                "/jwks",
                get(move || async move {
                    fetches_for_route.fetch_add(1, Ordering::SeqCst);
                    let keys = keys_for_route.lock().unwrap().clone();
                    axum::Json(json!({ "keys": keys }))
                }),
            )
            .route(
                "/introspect",
                axum::routing::post(
                    move |headers: axum::http::HeaderMap, body: String| async move {
                        introspections_for_route.fetch_add(1, Ordering::SeqCst);
                        let current = now_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most_for_route.fetch_max(current, Ordering::SeqCst);
                        let pause = delay_for_route.load(Ordering::SeqCst);
                        if pause > 0 {
                            // The provider being slow is the scenario under test, not a wait.
                            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                        }
                        now_in_flight.fetch_sub(1, Ordering::SeqCst);
                        let (id, secret) = INTROSPECTION_CLIENT;
                        let expected = format!(
                            "Basic {}",
                            base64::engine::general_purpose::STANDARD
                                .encode(format!("{id}:{secret}"))
                        );
                        if headers.get("authorization").and_then(|v| v.to_str().ok())
                            != Some(expected.as_str())
                        {
                            return (
                                axum::http::StatusCode::UNAUTHORIZED,
                                axum::Json(json!({"error": "invalid_client"})),
                            );
                        }
                        let token = url::form_urlencoded::parse(body.as_bytes())
                            .find(|(k, _)| k == "token")
                            .map(|(_, v)| v.into_owned())
                            .unwrap_or_default();
                        let answer = opaque_for_route
                            .lock()
                            .unwrap()
                            .get(&token)
                            .cloned()
                            .unwrap_or(json!({"active": false}));
                        (axum::http::StatusCode::OK, axum::Json(answer))
                    },
                ),
            );
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url,
            keys: published,
            jwks_fetches: fetches,
            opaque,
            introspections,
            introspection_delay_ms: delay,
            most_in_flight: most,
            _server: server,
        }
    }

    /// Replaces the published keys (a key rotation).
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.keys.lock().unwrap() = keys.iter().map(|k| k.jwk()).collect();
    }

    /// Makes `token` an opaque token whose introspection answers `answer`.
    pub fn issue_opaque(&self, token: &str, answer: Value) {
        self.opaque.lock().unwrap().insert(token.to_owned(), answer);
    }

    /// Makes every introspection answer take `ms` milliseconds.
    pub fn slow_introspection(&self, ms: u64) {
        self.introspection_delay_ms.store(ms, Ordering::SeqCst);
    }

    pub fn most_introspections_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }

    pub fn introspections(&self) -> usize {
        self.introspections.load(Ordering::SeqCst)
    }

    pub fn jwks_fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }

    /// The claims of a good access token for `sub` at `audience`, valid for an hour.
    pub fn claims(&self, sub: &str, audience: &str, scope: &str) -> Value {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        json!({"iss": self.url, "sub": sub, "aud": audience, "scope": scope,
               "client_id": "test-client", "iat": now, "exp": now + 3600})
    }
}
