//! The organisation's identity provider as configured (`--idp-issuer`, `--idp-client-id`,
//! its secret, an ID token file) and what its metadata says that enterprise-managed
//! authorization uses: where tokens are exchanged and where a browser logs in.

use std::path::PathBuf;

use crate::secret::Secret;

/// The organisation's identity provider: `--idp-issuer`, `--idp-client-id`,
/// `--idp-client-secret`, `--idp-id-token-file`.
#[derive(Debug, Clone)]
pub struct IdpSettings {
    /// Exactly as the IdP's metadata names itself.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// An ID token obtained elsewhere, read at each login (instead of a browser login).
    pub id_token_file: Option<PathBuf>,
}

/// What the IdP's metadata says that this flow uses.
#[derive(Debug, Clone)]
pub struct IdpEndpoints {
    pub token_endpoint: url::Url,
    pub authorization_endpoint: Option<url::Url>,
    pub iss_parameter_supported: bool,
    pub offline_access: bool,
}

/// Reads an IdP's metadata (its `issuer` already checked against the configured one):
/// the token endpoint, and what a browser login there needs.
pub fn idp_endpoints(metadata: &serde_json::Value) -> Result<IdpEndpoints, String> {
    let url = |name: &str| {
        metadata[name]
            .as_str()
            .map(|u| super::wellknown::checked(u, name))
            .transpose()
    };
    Ok(IdpEndpoints {
        token_endpoint: url("token_endpoint")?
            .ok_or("the identity provider's metadata has no token_endpoint")?,
        authorization_endpoint: url("authorization_endpoint")?,
        iss_parameter_supported: metadata["authorization_response_iss_parameter_supported"]
            .as_bool()
            .unwrap_or(false),
        offline_access: metadata["scopes_supported"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s == "offline_access")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idp_metadata_gives_its_endpoints_and_needs_a_token_endpoint() {
        let endpoints = idp_endpoints(&serde_json::json!({
            "issuer": "https://idp.example", "token_endpoint": "https://idp.example/token",
            "authorization_endpoint": "https://idp.example/authorize",
            "scopes_supported": ["openid", "offline_access"]}))
        .unwrap();
        assert_eq!(
            endpoints.token_endpoint.as_str(),
            "https://idp.example/token"
        );
        assert!(endpoints.offline_access && !endpoints.iss_parameter_supported);
        let e = idp_endpoints(&serde_json::json!({"issuer": "https://idp.example"})).unwrap_err();
        assert!(e.contains("no token_endpoint"), "{e}");
    }
}
