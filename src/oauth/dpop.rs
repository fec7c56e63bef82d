//! DPoP (RFC 9449), the pieces a client needs: a P-256 key per login (kept with the grant
//! as PKCS#8, a secret), its public JWK and RFC 7638 thumbprint (what a bound token's
//! `cnf.jkt` names), the proof JWT a token request or a resource request carries (`typ`
//! `dpop+jwt`, the public `jwk`, a fresh `jti`, `htm`, `htu` without query or fragment,
//! `iat`, `ath` with an access token, the server's `nonce` when it asked for one), and the
//! reading of a server's request for a nonce (`use_dpop_nonce` with a `DPoP-Nonce` header).
//! No I/O: the OAuth flows and the relay's link put these on the wire.

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use clap::ValueEnum;
use serde_json::{Value, json};

use super::pkce::random_token;
use crate::secret::Secret;

/// The header a DPoP proof travels in, and the one a server's nonce comes in.
pub const PROOF_HEADER: &str = "DPoP";
pub const NONCE_HEADER: &str = "DPoP-Nonce";
/// The error a server answers when the proof must carry its (new) nonce.
pub const USE_NONCE: &str = "use_dpop_nonce";
/// The longest nonce a server may ask for (RFC 9449 §8: a nonce is opaque; one that would
/// not fit a header line is not one).
const MAX_NONCE: usize = 1024;

/// `--dpop`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DpopMode {
    /// Bind every login's tokens; a server that issues a Bearer token anyway is refused.
    Always,
    /// Bind when the server challenges with `DPoP`, or when the authorization server lists
    /// ES256 in `dpop_signing_alg_values_supported` and the server does not challenge with
    /// Bearer alone.
    #[default]
    Auto,
    /// Never bind (Bearer tokens only).
    Never,
}

/// A login's DPoP key.
pub struct DpopKey {
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DpopKey(jkt={})", self.thumbprint())
    }
}

impl DpopKey {
    /// A new key for a new login.
    pub fn generate() -> Result<DpopKey, String> {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .map_err(|_| "could not make a DPoP key".to_owned())?;
        Ok(DpopKey { pair })
    }

    /// The key as the token store keeps it (base64 PKCS#8): a secret.
    pub fn to_stored(&self) -> Result<Secret, String> {
        let document = self
            .pair
            .to_pkcs8v1()
            .map_err(|_| "could not save the DPoP key".to_owned())?;
        Ok(Secret::new(STANDARD.encode(document.as_ref())))
    }

    /// A key the token store kept.
    pub fn from_stored(stored: &Secret) -> Result<DpopKey, String> {
        let der = STANDARD
            .decode(stored.expose())
            .map_err(|_| "the stored DPoP key is damaged; log in again".to_owned())?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
            .map_err(|_| "the stored DPoP key is not a P-256 key; log in again".to_owned())?;
        Ok(DpopKey { pair })
    }

    /// The public key's coordinates, base64url.
    fn coordinates(&self) -> (String, String) {
        // An uncompressed point: 0x04, then 32 bytes of x and 32 of y.
        let point = self.pair.public_key().as_ref();
        (
            URL_SAFE_NO_PAD.encode(&point[1..33]),
            URL_SAFE_NO_PAD.encode(&point[33..65]),
        )
    }

    /// The public key as a JWK (no private part).
    pub fn jwk(&self) -> Value {
        let (x, y) = self.coordinates();
        json!({"kty": "EC", "crv": "P-256", "x": x, "y": y})
    }

    /// The RFC 7638 thumbprint: what a bound token's `cnf.jkt` carries.
    pub fn thumbprint(&self) -> String {
        let (x, y) = self.coordinates();
        thumbprint_of(&x, &y)
    }

    /// A proof for one request: `method` and `url` as sent (the query and fragment are
    /// left out of `htu`), at `now` (unix seconds); with `access_token` for a resource
    /// request (`ath`), and the server's `nonce` when it asked for one.
    pub fn proof(
        &self,
        method: &str,
        url: &url::Url,
        now: u64,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<Secret, String> {
        let ath = access_token.map(ath);
        self.proof_at(method, &htu(url), now, ath.as_deref(), nonce)
    }

    /// [`DpopKey::proof`] with `htu` and `ath` already made (see [`htu`], [`htu_of_uri`]
    /// and [`ath`]): a resource request signs many proofs for one token.
    pub fn proof_at(
        &self,
        method: &str,
        htu: &str,
        now: u64,
        ath: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<Secret, String> {
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk()});
        let mut claims = json!({
            "jti": random_token(16).expose(),
            "htm": method,
            "htu": htu,
            "iat": now,
        });
        if let Some(ath) = ath {
            claims["ath"] = Value::String(ath.to_owned());
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = Value::String(nonce.to_owned());
        }
        super::jwt::sign_es256(&self.pair, &header, &claims)
            .map_err(|_| "could not sign a DPoP proof".to_owned())
    }
}

/// RFC 7638 over an EC P-256 key: SHA-256 of its required members in lexical order, with
/// no spaces, base64url.
pub fn thumbprint_of(x: &str, y: &str) -> String {
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    URL_SAFE_NO_PAD.encode(digest(&SHA256, canonical.as_bytes()))
}

/// `htu`: the request's URL without its query and fragment (RFC 9449 §4.2).
pub fn htu(url: &url::Url) -> String {
    let mut bare = url.clone();
    bare.set_query(None);
    bare.set_fragment(None);
    bare.to_string()
}

/// `htu` for a request URI as the HTTP layer holds it: scheme, authority and path.
pub fn htu_of_uri(uri: &http::Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("https");
    let authority = uri.authority().map_or("", |a| a.as_str());
    format!("{scheme}://{authority}{}", uri.path())
}

/// `ath`: the access token's SHA-256, base64url.
pub fn ath(access_token: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest(&SHA256, access_token.as_bytes()))
}

/// The nonce a server asks the next proof to carry, if this answer asks for one: a token
/// endpoint's 400 with `error: use_dpop_nonce`, or a resource server's 401 whose
/// `WWW-Authenticate: DPoP` says `error="use_dpop_nonce"`; the nonce itself from the
/// `DPoP-Nonce` header (visible ASCII, at most 1024 bytes, or it is not used).
pub fn nonce_asked(status: u16, headers: &http::HeaderMap, body: &[u8]) -> Option<String> {
    let nonce = nonce_offered(headers)?;
    let asked = match status {
        400 => serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| {
                v.get("error")
                    .and_then(Value::as_str)
                    .map(|e| e == USE_NONCE)
            })
            .unwrap_or(false),
        401 => super::challenge::names_error(
            headers
                .get_all(http::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
            USE_NONCE,
        ),
        _ => false,
    };
    asked.then_some(nonce)
}

/// A nonce a server sent without asking (it may, on any answer): the next proof to that
/// server carries it.
pub fn nonce_offered(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(NONCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|n| {
            !n.is_empty() && n.len() <= MAX_NONCE && n.bytes().all(|b| b.is_ascii_graphic())
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests;
