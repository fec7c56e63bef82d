//! Requests to the authorization server's token endpoint: the client's authentication
//! (Basic, a form secret, or a signed assertion), and for a DPoP-bound login a fresh proof
//! on every request, retried once with the server's nonce when it asks for one
//! (RFC 9449 §8).

use http::HeaderValue;
use url::Url;

use super::discovery::Discovered;
use super::dpop::{self, DpopKey};
use super::flow::ServerAuth;
use super::http::{BasicAuth, Fetched};
use super::store::Registration;
use super::token::{TokenAnswer, TokenFailure, answer_of, unix_now};
use crate::secret::Secret;

impl ServerAuth {
    /// A token request to `endpoint`, read into an answer. With `key`, the request carries
    /// a DPoP proof; a `use_dpop_nonce` refusal is retried once with the nonce it names,
    /// and a nonce the server offers is kept for the next request.
    pub(super) async fn token_request(
        &self,
        endpoint: &Url,
        form: Vec<(&'static str, &str)>,
        client: &Registration,
        issuer: &str,
        key: Option<&DpopKey>,
    ) -> Result<TokenAnswer, TokenFailure> {
        let mut nonce_retried = false;
        loop {
            let proof = self
                .token_proof(key, endpoint)
                .map_err(TokenFailure::Passing)?;
            let fetched = self
                .authenticated_post(endpoint, form.clone(), client, issuer, proof.as_ref())
                .await
                .map_err(TokenFailure::Passing)?;
            if key.is_some() && self.note_as_nonce(&fetched) && !nonce_retried {
                nonce_retried = true;
                continue;
            }
            // A refused proof (a nonce asked for again, a clock too far off) says nothing
            // about the grant or the assertion: worth trying later, never a reason to
            // forget them.
            if key.is_some()
                && let Some(code) = proof_refused(&fetched)
            {
                return Err(TokenFailure::Passing(format!(
                    "the authorization server refused the DPoP proof: {code} (HTTP {})",
                    fetched.status
                )));
            }
            return answer_of(&fetched);
        }
    }

    /// A token request to the discovered server's token endpoint.
    pub(super) async fn token_request_at(
        &self,
        found: &Discovered,
        form: Vec<(&'static str, &str)>,
        client: &Registration,
        key: Option<&DpopKey>,
    ) -> Result<TokenAnswer, TokenFailure> {
        self.token_request(
            &found.server.token_endpoint,
            form,
            client,
            &found.server.issuer,
            key,
        )
        .await
    }

    /// The DPoP proof for a POST to the authorization server's `endpoint`, with its
    /// latest nonce; `None` without a key.
    pub(super) fn token_proof(
        &self,
        key: Option<&DpopKey>,
        endpoint: &Url,
    ) -> Result<Option<Secret>, String> {
        let nonce = self.as_nonce.lock().expect("nonce lock").clone();
        key.map(|key| key.proof("POST", endpoint, unix_now(), None, nonce.as_deref()))
            .transpose()
    }

    /// Keeps the nonce the authorization server sent, if any; true when the answer was a
    /// refusal asking for it (the request is worth one more try with it).
    pub(super) fn note_as_nonce(&self, fetched: &Fetched) -> bool {
        let asked = dpop::nonce_asked(fetched.status.as_u16(), &fetched.headers, &fetched.body);
        let nonce = asked
            .clone()
            .or_else(|| dpop::nonce_offered(&fetched.headers));
        if let Some(nonce) = nonce {
            *self.as_nonce.lock().expect("nonce lock") = Some(nonce);
        }
        asked.is_some()
    }

    /// POSTs a form to an endpoint of the authorization server with the client's
    /// credentials in the way the client is registered for, and the DPoP `proof` if any.
    pub(super) async fn authenticated_post(
        &self,
        endpoint: &Url,
        mut form: Vec<(&'static str, &str)>,
        client: &Registration,
        issuer: &str,
        proof: Option<&Secret>,
    ) -> Result<Fetched, String> {
        let mut extra = http::HeaderMap::new();
        if let Some(proof) = proof {
            let mut value = HeaderValue::from_str(proof.expose())
                .map_err(|_| "a DPoP proof is not a valid header value".to_owned())?;
            value.set_sensitive(true);
            extra.insert(dpop::PROOF_HEADER, value);
        }
        let assertion;
        if client.token_endpoint_auth_method == "private_key_jwt"
            && let Some(key) = &self.settings.client_key
        {
            // The audience is the authorization server, named by its issuer (RFC 7523 §3).
            assertion = key.assertion(&client.client_id, issuer, unix_now())?;
            form.retain(|(k, _)| *k != "client_id");
            form.push(("client_id", &client.client_id));
            form.push(("client_assertion_type", super::jwt::ASSERTION_TYPE));
            form.push(("client_assertion", assertion.expose()));
            return self.http.post_form_with(endpoint, &form, None, extra).await;
        }
        let secret = client.client_secret.as_ref().map(Secret::expose);
        let basic = match (client.token_endpoint_auth_method.as_str(), secret) {
            ("client_secret_basic", Some(secret)) => {
                form.retain(|(k, _)| *k != "client_id");
                Some(BasicAuth {
                    client_id: &client.client_id,
                    client_secret: secret,
                })
            }
            ("client_secret_post", Some(secret)) => {
                form.push(("client_secret", secret));
                None
            }
            _ => None,
        };
        self.http
            .post_form_with(endpoint, &form, basic, extra)
            .await
    }
}

/// The DPoP error a token endpoint's 400 names, if it names one (RFC 9449 §5.1, §8).
fn proof_refused(fetched: &Fetched) -> Option<&'static str> {
    if fetched.status != http::StatusCode::BAD_REQUEST {
        return None;
    }
    let error = serde_json::from_slice::<serde_json::Value>(&fetched.body).ok()?;
    match error["error"].as_str()? {
        "use_dpop_nonce" => Some("use_dpop_nonce"),
        "invalid_dpop_proof" => Some("invalid_dpop_proof"),
        _ => None,
    }
}
