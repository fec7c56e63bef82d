//! What a request to the MCP server shows for its login: `Authorization: Bearer <token>`,
//! or for a DPoP-bound token `Authorization: DPoP <token>` with a fresh proof per request
//! (RFC 9449 §7: `htm`, `htu`, `ath` over the token, the resource server's latest nonce),
//! signed with the key the grant keeps.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Uri, header::AUTHORIZATION};

use super::dpop::{self, DpopKey};
use super::store::Grant;
use super::token::unix_now;

/// A login as requests present it.
#[derive(Clone, Debug)]
pub struct Presented {
    /// The `Authorization` value, marked sensitive so no HTTP layer logs it.
    pub authorization: HeaderValue,
    bound: Option<Arc<Bound>>,
}

/// A DPoP-bound token's key, and the token's hash every proof carries.
#[derive(Debug)]
struct Bound {
    key: DpopKey,
    ath: String,
}

impl PartialEq for Presented {
    fn eq(&self, other: &Self) -> bool {
        self.authorization == other.authorization
    }
}

impl Presented {
    /// How `grant` is presented. A stored key that cannot be read leaves the token to be
    /// sent as Bearer: the server refuses it, and the 401 leads to a new login.
    pub fn of(grant: &Grant) -> Presented {
        let token = grant.access_token.expose();
        let bound = grant.dpop_key.as_ref().and_then(|stored| {
            DpopKey::from_stored(stored)
                .inspect_err(|e| tracing::warn!("{e}"))
                .ok()
        });
        let scheme = if bound.is_some() { "DPoP" } else { "Bearer" };
        let mut authorization = HeaderValue::from_str(&format!("{scheme} {token}"))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer invalid"));
        authorization.set_sensitive(true);
        Presented {
            authorization,
            bound: bound.map(|key| {
                Arc::new(Bound {
                    key,
                    ath: dpop::ath(token),
                })
            }),
        }
    }

    /// A credential given as is (`--bearer-token`, `-H Authorization: …`).
    pub fn given(mut authorization: HeaderValue) -> Presented {
        authorization.set_sensitive(true);
        Presented {
            authorization,
            bound: None,
        }
    }

    /// Whether the token is DPoP-bound (each request needs a proof).
    pub fn is_bound(&self) -> bool {
        self.bound.is_some()
    }

    /// Puts `Authorization`, and for a bound token a proof for `method` on `uri` with the
    /// resource server's `nonce`, into `headers`.
    pub fn stamp(&self, headers: &mut HeaderMap, method: &str, uri: &Uri, nonce: Option<&str>) {
        headers.insert(AUTHORIZATION, self.authorization.clone());
        let Some(bound) = &self.bound else {
            return;
        };
        let htu = dpop::htu_of_uri(uri);
        let proof = bound
            .key
            .proof_at(method, &htu, unix_now(), Some(&bound.ath), nonce)
            .and_then(|proof| {
                HeaderValue::from_str(proof.expose())
                    .map_err(|_| "a DPoP proof is not a valid header value".to_owned())
            });
        match proof {
            Ok(mut value) => {
                value.set_sensitive(true);
                headers.insert(dpop::PROOF_HEADER, value);
            }
            Err(e) => tracing::warn!("{e}; the request goes without a DPoP proof"),
        }
    }
}

/// A resource server's latest DPoP nonce (RFC 9449 §9), for the next proof to it.
#[derive(Debug, Default)]
pub struct ServerNonce(std::sync::Mutex<Option<String>>);

impl ServerNonce {
    /// Puts `presented` into a request's headers, with a proof for `method` on `uri`
    /// carrying the latest nonce when the token is bound.
    pub fn stamp(&self, presented: &Presented, headers: &mut HeaderMap, method: &str, uri: &Uri) {
        let nonce = presented
            .is_bound()
            .then(|| self.0.lock().expect("nonce lock").clone())
            .flatten();
        presented.stamp(headers, method, uri, nonce.as_deref());
    }

    /// Reads the answer to a request that presented `presented`: keeps the nonce it
    /// sent, if any; true when it refused the request for want of that nonce (worth one
    /// more try with a new proof).
    pub fn note(&self, presented: &Presented, status: u16, headers: &HeaderMap) -> bool {
        if !presented.is_bound() {
            return false;
        }
        let asked = dpop::nonce_asked(status, headers, b"");
        if let Some(nonce) = asked.clone().or_else(|| dpop::nonce_offered(headers)) {
            *self.0.lock().expect("nonce lock") = Some(nonce);
        }
        asked.is_some()
    }
}
