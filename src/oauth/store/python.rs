//! Reads the Python mcp-stdio's token file (`~/.config/mcp-stdio/tokens.json`, one object
//! keyed by server URL), so users who switch keep their logins.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use url::Url;

use super::{Document, Grant, Registration, grant_key};
use crate::secret::Secret;

/// One entry as the Python tool writes it (the fields we can use).
#[derive(Deserialize)]
struct Entry {
    access_token: Option<Secret>,
    token_type: Option<String>,
    expires_at: Option<f64>,
    refresh_token: Option<Secret>,
    scope: Option<String>,
    client_id: Option<String>,
    client_secret: Option<Secret>,
    client_secret_expires_at: Option<f64>,
    token_endpoint: Option<String>,
    issuer: Option<String>,
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    no_resource_indicator: bool,
    oauth_resource: Option<String>,
}

/// The logins in the Python tool's file, as our records. `None` when there is no such file;
/// entries that lack what a refresh needs are skipped.
pub fn import(path: &Path) -> Result<Option<Document>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let entries: BTreeMap<String, Entry> = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not the Python mcp-stdio's token file ({e})",
            path.display()
        )
    })?;
    let mut document = Document::default();
    for (server, entry) in entries {
        let (Ok(server), Some(access_token), Some(client_id), Some(token_endpoint)) = (
            Url::parse(&server),
            entry.access_token,
            entry.client_id,
            entry.token_endpoint,
        ) else {
            continue;
        };
        let resource = if entry.no_resource_indicator {
            None
        } else {
            Some(
                entry
                    .oauth_resource
                    .unwrap_or_else(|| server.as_str().to_owned()),
            )
        };
        let issuer = entry.issuer.unwrap_or_else(|| {
            Url::parse(&token_endpoint).map_or_else(
                |_| token_endpoint.clone(),
                |u| u.origin().ascii_serialization(),
            )
        });
        if let Some(method) = entry.token_endpoint_auth_method.clone() {
            document
                .registrations
                .entry(issuer.clone())
                .or_insert(Registration {
                    client_id: client_id.clone(),
                    client_secret: entry.client_secret,
                    client_secret_expires_at: entry.client_secret_expires_at.map(|s| s as u64),
                    token_endpoint_auth_method: method,
                    redirect_uri: None,
                });
        }
        document.grants.insert(
            grant_key(&server, resource.as_deref()),
            Grant {
                access_token,
                token_type: entry.token_type.unwrap_or_else(|| "Bearer".into()),
                expires_at: entry
                    .expires_at
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .map(|s| s as u64),
                refresh_token: entry.refresh_token,
                scope: entry.scope,
                issuer,
                token_endpoint,
                client_id,
                resource,
                revocation_endpoint: None,
                dpop_key: None,
            },
        );
    }
    Ok(Some(document))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_python_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        std::fs::write(
            &path,
            r#"{
  "https://mcp.example.com/mcp": {
    "access_token": "py-at", "token_type": "Bearer", "expires_at": 1900000000.5,
    "refresh_token": "py-rt", "id_token": null, "scope": "read",
    "client_id": "py-client", "client_secret": null, "client_secret_expires_at": null,
    "token_endpoint": "https://as.example.com/token", "issuer": "https://as.example.com",
    "token_endpoint_auth_method": "none", "no_resource_indicator": false,
    "oauth_resource": null, "iss_parameter_supported": true
  },
  "https://broken.example.com/mcp": {"access_token": "x"}
}"#,
        )
        .unwrap();
        let document = import(&path).unwrap().unwrap();
        assert_eq!(
            document.grants.len(),
            1,
            "the entry without a client is skipped"
        );
        let grant = &document.grants["https://mcp.example.com/mcp"];
        assert_eq!(grant.access_token.expose(), "py-at");
        assert_eq!(grant.expires_at, Some(1_900_000_000));
        assert_eq!(
            grant.resource.as_deref(),
            Some("https://mcp.example.com/mcp")
        );
        assert_eq!(
            document.registrations["https://as.example.com"].client_id,
            "py-client"
        );
        assert!(import(&dir.path().join("missing.json")).unwrap().is_none());
    }
}
