//! The two metadata documents OAuth discovery reads, and the checks that decide whether an
//! authorization server's document may be used: its `issuer` must be the one we asked
//! about, it must offer PKCE with S256, and every endpoint must be https (or loopback)
//! without userinfo.

use serde::Deserialize;
use url::Url;

use super::wellknown::checked;

/// RFC 9728 protected resource metadata, the fields the client uses.
#[derive(Debug, Clone, Deserialize)]
pub struct ProtectedResource {
    pub resource: Option<String>,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 / OpenID Connect provider metadata, as published.
#[derive(Debug, Clone, Deserialize)]
struct Published {
    issuer: Option<String>,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    registration_endpoint: Option<String>,
    device_authorization_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
    code_challenge_methods_supported: Option<Vec<String>>,
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
    scopes_supported: Option<Vec<String>>,
    grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    client_id_metadata_document_supported: bool,
    #[serde(default)]
    dpop_signing_alg_values_supported: Option<Vec<String>>,
}

/// An authorization server whose metadata passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationServer {
    /// Exactly as published (RFC 9207 compares it as a string).
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    pub device_authorization_endpoint: Option<Url>,
    pub revocation_endpoint: Option<Url>,
    /// Token endpoint client authentication methods; RFC 8414's default when absent.
    pub token_endpoint_auth_methods: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
    /// The grants the server lists (`None`: it does not say).
    pub grant_types_supported: Option<Vec<String>>,
    pub iss_parameter_supported: bool,
    pub client_id_metadata_documents: bool,
    /// `dpop_signing_alg_values_supported` (RFC 9449 §5.1): the server binds tokens to
    /// keys of these algorithms; empty when it does not say.
    pub dpop_algs: Vec<String>,
}

/// How strictly the document's `issuer` must match the one it was fetched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssuerMatch {
    /// Identical (RFC 8414 §3.3, MCP 2026-07-28): the issuer came from the server's
    /// protected resource metadata.
    Exact,
    /// Any issuer on the same origin: the 2025-03-26 fallback, where we guessed the issuer
    /// from the server's origin and the document may name a path under it.
    SameOrigin,
}

/// Parses and checks the metadata fetched for `expected_issuer`. The error says why the
/// document cannot be used.
pub fn authorization_server(
    body: &[u8],
    expected_issuer: &str,
    matching: IssuerMatch,
) -> Result<AuthorizationServer, String> {
    let doc: Published = serde_json::from_slice(body)
        .map_err(|e| format!("the authorization server metadata is not valid JSON ({e})"))?;
    let issuer = doc
        .issuer
        .ok_or("the authorization server metadata has no issuer")?;
    let same_origin = || {
        let origin = |s: &str| Url::parse(s).ok().map(|u| u.origin());
        origin(&issuer).is_some() && origin(&issuer) == origin(expected_issuer)
    };
    let matches = issuer == expected_issuer
        || issuer == expected_issuer.trim_end_matches('/')
        || (matching == IssuerMatch::SameOrigin && same_origin());
    if !matches {
        return Err(format!(
            "the authorization server metadata names issuer {issuer:?}, not {expected_issuer:?}; it is not used (mix-up protection)"
        ));
    }
    let methods = doc.code_challenge_methods_supported.unwrap_or_default();
    if !methods.iter().any(|m| m == "S256") {
        return Err(
            "the authorization server does not advertise PKCE with S256 (code_challenge_methods_supported), which MCP requires; refusing to log in".into(),
        );
    }
    let required = |value: Option<String>, name: &str| -> Result<Url, String> {
        let value =
            value.ok_or_else(|| format!("the authorization server metadata has no {name}"))?;
        checked(&value, name)
    };
    let optional = |value: Option<String>, name: &str| -> Result<Option<Url>, String> {
        value.map(|v| checked(&v, name)).transpose()
    };
    Ok(AuthorizationServer {
        authorization_endpoint: required(doc.authorization_endpoint, "authorization_endpoint")?,
        token_endpoint: required(doc.token_endpoint, "token_endpoint")?,
        registration_endpoint: optional(doc.registration_endpoint, "registration_endpoint")?,
        device_authorization_endpoint: optional(
            doc.device_authorization_endpoint,
            "device_authorization_endpoint",
        )?,
        revocation_endpoint: optional(doc.revocation_endpoint, "revocation_endpoint")?,
        token_endpoint_auth_methods: doc
            .token_endpoint_auth_methods_supported
            .unwrap_or_else(|| vec!["client_secret_basic".into()]),
        scopes_supported: doc.scopes_supported,
        grant_types_supported: doc.grant_types_supported,
        iss_parameter_supported: doc.authorization_response_iss_parameter_supported,
        client_id_metadata_documents: doc.client_id_metadata_document_supported,
        dpop_algs: doc.dpop_signing_alg_values_supported.unwrap_or_default(),
        issuer,
    })
}

/// Parses protected resource metadata.
pub fn protected_resource(body: &[u8]) -> Result<ProtectedResource, String> {
    serde_json::from_slice(body)
        .map_err(|e| format!("the protected resource metadata is not valid JSON ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(overrides: serde_json::Value) -> Vec<u8> {
        let mut base = json!({
            "issuer": "https://as.example.com/t1",
            "authorization_endpoint": "https://as.example.com/t1/authorize",
            "token_endpoint": "https://as.example.com/t1/token",
            "registration_endpoint": "https://as.example.com/t1/register",
            "code_challenge_methods_supported": ["S256"],
        });
        for (k, v) in overrides.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::to_vec(&base).unwrap()
    }

    #[test]
    fn a_good_document_passes_with_defaults_filled_in() {
        let server = authorization_server(
            &doc(json!({})),
            "https://as.example.com/t1",
            IssuerMatch::Exact,
        )
        .unwrap();
        assert_eq!(server.issuer, "https://as.example.com/t1");
        assert_eq!(
            server.token_endpoint.as_str(),
            "https://as.example.com/t1/token"
        );
        assert_eq!(server.token_endpoint_auth_methods, ["client_secret_basic"]);
        assert!(!server.iss_parameter_supported);
    }

    #[test]
    fn another_issuer_is_refused() {
        let e = authorization_server(
            &doc(json!({"issuer": "https://evil.example.com"})),
            "https://as.example.com/t1",
            IssuerMatch::SameOrigin,
        )
        .unwrap_err();
        assert!(e.contains("mix-up"), "{e}");
        let same_origin = doc(json!({"issuer": "https://as.example.com/other"}));
        assert!(
            authorization_server(
                &same_origin,
                "https://as.example.com/t1",
                IssuerMatch::Exact
            )
            .is_err()
        );
        assert!(
            authorization_server(
                &same_origin,
                "https://as.example.com",
                IssuerMatch::SameOrigin
            )
            .is_ok(),
            "the 2025-03-26 fallback accepts a path on the same origin"
        );
    }

    #[test]
    fn no_s256_means_no_login() {
        for methods in [json!(null), json!(["plain"])] {
            let e = authorization_server(
                &doc(json!({"code_challenge_methods_supported": methods})),
                "https://as.example.com/t1",
                IssuerMatch::Exact,
            )
            .unwrap_err();
            assert!(e.contains("S256"), "{e}");
        }
    }

    #[test]
    fn an_endpoint_that_is_not_https_is_refused() {
        let e = authorization_server(
            &doc(json!({"token_endpoint": "http://as.example.com/token"})),
            "https://as.example.com/t1",
            IssuerMatch::Exact,
        )
        .unwrap_err();
        assert!(e.contains("token_endpoint"), "{e}");
    }
}
