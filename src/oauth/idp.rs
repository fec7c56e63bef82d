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

/// Where an IdP's metadata may be: OpenID Connect's location first (IdPs are OpenID
/// providers), then RFC 8414's.
pub fn idp_metadata_urls(issuer: &url::Url) -> Vec<url::Url> {
    let base = issuer.as_str().trim_end_matches('/');
    let path = issuer.path().trim_end_matches('/');
    let origin = issuer.origin().ascii_serialization();
    [
        format!("{base}/.well-known/openid-configuration"),
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
    ]
    .iter()
    .filter_map(|u| url::Url::parse(u).ok())
    .collect()
}

/// Reads an IdP's metadata: its `issuer` must be the configured one (mix-up protection),
/// its endpoints valid URLs.
pub fn idp_metadata(body: &[u8], expected_issuer: &str) -> Result<IdpEndpoints, String> {
    #[derive(serde::Deserialize)]
    struct Published {
        issuer: Option<String>,
        token_endpoint: Option<String>,
        authorization_endpoint: Option<String>,
        #[serde(default)]
        authorization_response_iss_parameter_supported: bool,
        scopes_supported: Option<Vec<String>>,
    }
    let doc: Published = serde_json::from_slice(body)
        .map_err(|e| format!("the identity provider's metadata is not valid JSON ({e})"))?;
    let issuer = doc.issuer.unwrap_or_default();
    if issuer.trim_end_matches('/') != expected_issuer.trim_end_matches('/') {
        return Err(format!(
            "the identity provider's metadata names issuer {issuer:?}, not {expected_issuer:?} (--idp-issuer); it is not used"
        ));
    }
    let token_endpoint = doc
        .token_endpoint
        .ok_or("the identity provider's metadata has no token_endpoint")?;
    Ok(IdpEndpoints {
        token_endpoint: super::wellknown::checked(&token_endpoint, "token_endpoint")?,
        authorization_endpoint: doc
            .authorization_endpoint
            .map(|u| super::wellknown::checked(&u, "authorization_endpoint"))
            .transpose()?,
        iss_parameter_supported: doc.authorization_response_iss_parameter_supported,
        offline_access: doc
            .scopes_supported
            .is_some_and(|s| s.iter().any(|s| s == "offline_access")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idp_metadata_must_name_the_configured_issuer() {
        let doc = |issuer: &str| {
            serde_json::json!({"issuer": issuer, "token_endpoint": "https://idp.example/token",
                               "authorization_endpoint": "https://idp.example/authorize",
                               "scopes_supported": ["openid", "offline_access"]})
            .to_string()
        };
        let read = idp_metadata(
            doc("https://idp.example").as_bytes(),
            "https://idp.example/",
        );
        let endpoints = read.unwrap();
        assert_eq!(
            endpoints.token_endpoint.as_str(),
            "https://idp.example/token"
        );
        assert!(endpoints.offline_access);
        let e = idp_metadata(
            doc("https://evil.example").as_bytes(),
            "https://idp.example",
        )
        .unwrap_err();
        assert!(e.contains("not \"https://idp.example\""), "{e}");
        let urls = idp_metadata_urls(&url::Url::parse("https://idp.example/tenant").unwrap());
        assert_eq!(
            urls[0].as_str(),
            "https://idp.example/tenant/.well-known/openid-configuration"
        );
        assert_eq!(
            urls[1].as_str(),
            "https://idp.example/.well-known/oauth-authorization-server/tenant"
        );
    }
}
