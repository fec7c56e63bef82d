//! What the OAuth client keeps between runs: grants (tokens) keyed by server and resource,
//! and client registrations keyed by the authorization server's issuer, which MCP requires
//! (2026-07-28: credentials are bound to the issuer that issued them).

pub mod backend;
pub mod file;
pub mod keyring;
pub mod lock;
pub mod python;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::secret::Secret;

/// Where the grants are kept: `--token-store`, the token file, the Python tool's file to
/// import, and how long one OS keyring call may take.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub token_file: std::path::PathBuf,
    /// `--token-store`.
    pub choice: backend::Choice,
    /// `--keyring-timeout`.
    pub keyring_timeout: std::time::Duration,
    /// The Python mcp-stdio's token file, imported on first use.
    pub python_tokens: Option<std::path::PathBuf>,
}

impl StoreConfig {
    /// Opens the store this names: the OS keyring or the private file (with the Python
    /// tool's file imported on first use), each keyring call bounded. The one way the
    /// relay and the terminal commands open it.
    pub fn open(&self) -> Result<backend::TokenStore, String> {
        let file =
            file::FileStore::new(self.token_file.clone()).importing(self.python_tokens.clone());
        backend::TokenStore::open_with_patience(self.choice, file, self.keyring_timeout)
    }
}

/// Tokens for one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub access_token: Secret,
    #[serde(default = "bearer")]
    pub token_type: String,
    /// Unix seconds; `None` when the server gave no `expires_in` (never expires early).
    pub expires_at: Option<u64>,
    pub refresh_token: Option<Secret>,
    pub scope: Option<String>,
    pub issuer: String,
    pub token_endpoint: String,
    pub client_id: String,
    /// The RFC 8707 resource the grant was issued for (`None`: none was sent).
    pub resource: Option<String>,
    /// Where `logout` revokes the grant (RFC 7009), when the server has such an endpoint.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The DPoP key the access token is bound to (RFC 9449; base64 PKCS#8, a secret kept
    /// as tokens are): every request with the token, and every refresh, is signed with it.
    /// `None` for a Bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<Secret>,
}

fn bearer() -> String {
    "Bearer".into()
}

/// A client registered at (or configured for) one authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// Unix seconds; `None` or 0 means the secret does not expire.
    pub client_secret_expires_at: Option<u64>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub token_endpoint_auth_method: String,
    /// The loopback redirect URI registered, reused (same port) when it is free.
    #[serde(default)]
    pub redirect_uri: Option<String>,
}

/// Everything the store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    #[serde(default = "current_version")]
    pub version: u32,
    #[serde(default)]
    pub grants: BTreeMap<String, Grant>,
    /// Keyed by issuer.
    #[serde(default)]
    pub registrations: BTreeMap<String, Registration>,
    /// Logins at organisations' identity providers (enterprise-managed authorization),
    /// keyed by [`idp_key`]: one serves every MCP server of the organisation.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub idp_logins: BTreeMap<String, IdpLogin>,
}

/// An ID token from an organisation's identity provider, and how to renew it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdpLogin {
    pub id_token: Secret,
    /// The ID token's `exp` (Unix seconds), when it has one.
    pub expires_at: Option<u64>,
    pub refresh_token: Option<Secret>,
    pub token_endpoint: String,
}

/// The key an identity provider login is stored under: its issuer and our client there.
pub fn idp_key(issuer: &str, client_id: &str) -> String {
    format!("{issuer} client={client_id}")
}

fn current_version() -> u32 {
    1
}

/// The key a grant is stored under: the server URL in canonical form (lowercase scheme and
/// host, default port dropped, no userinfo, fragment or trailing `/`, query kept) plus the
/// resource when it differs from the server URL.
pub fn grant_key(server: &Url, resource: Option<&str>) -> String {
    let mut canonical = server.clone();
    let _ = canonical.set_username("");
    let _ = canonical.set_password(None);
    canonical.set_fragment(None);
    let mut key = canonical.as_str().to_owned();
    if canonical.query().is_none() && key.ends_with('/') {
        key.pop();
    }
    match resource {
        Some(resource) if resource.trim_end_matches('/') != key => {
            format!("{key} resource={resource}")
        }
        _ => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_keys_are_canonical() {
        let key = |s: &str| grant_key(&Url::parse(s).unwrap(), None);
        assert_eq!(
            key("HTTPS://Example.COM:443/mcp/"),
            "https://example.com/mcp"
        );
        assert_eq!(
            key("https://u:p@example.com/mcp#x"),
            "https://example.com/mcp"
        );
        assert_eq!(key("https://example.com/"), "https://example.com");
        assert_eq!(
            key("https://example.com/mcp?t=1"),
            "https://example.com/mcp?t=1"
        );
        let server = Url::parse("https://example.com/mcp").unwrap();
        assert_eq!(
            grant_key(&server, Some("https://example.com/mcp")),
            "https://example.com/mcp"
        );
        assert_eq!(
            grant_key(&server, Some("https://api.example.com")),
            "https://example.com/mcp resource=https://api.example.com"
        );
    }

    #[test]
    fn a_grants_debug_output_holds_no_token() {
        let grant = Grant {
            access_token: Secret::new("at-secret"),
            token_type: "Bearer".into(),
            expires_at: None,
            refresh_token: Some(Secret::new("rt-secret")),
            scope: None,
            issuer: "https://as".into(),
            token_endpoint: "https://as/token".into(),
            client_id: "c".into(),
            resource: None,
            revocation_endpoint: None,
            dpop_key: None,
        };
        let shown = format!("{grant:?}");
        assert!(
            !shown.contains("at-secret") && !shown.contains("rt-secret"),
            "{shown}"
        );
    }
}
