//! The JWT bearer grant (RFC 7523 §2.1): a signed assertion traded for an access token.
//! Workload identity (SEP-1933, `--workload-token-file`) presents the workload's own JWT,
//! re-read from its file at every token request (those files rotate), with no client
//! secret; enterprise-managed authorization presents an ID-JAG. A refused assertion is not
//! presented again, nor another grant tried: the login stops and says why.

use std::path::Path;

use super::discovery::Discovered;
use super::dpop::DpopKey;
use super::flow::ServerAuth;
use super::store::{Grant, Registration};
use super::token::{TokenAnswer, TokenFailure};
use crate::secret::Secret;

/// RFC 7523's grant type.
pub const GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

impl ServerAuth {
    /// Logs in as the workload: its JWT from `--workload-token-file`, read now, traded
    /// with the JWT bearer grant. The same token refused before is not sent again.
    pub(super) async fn login_workload(
        &self,
        path: &Path,
        found: &Discovered,
        scope: Option<&str>,
        key: Option<DpopKey>,
    ) -> Result<Grant, String> {
        let assertion = read_jwt_file(
            path,
            "--workload-token-file",
            self.settings.max_credential_file,
        )?;
        let fingerprint = super::dpop::ath(assertion.expose());
        if let Some((refused, why)) = self.refused_assertion.lock().expect("refusal lock").clone()
            && refused == fingerprint
        {
            return Err(format!(
                "{why} (the workload token in {} has not changed since; mcp-stdio tries a token once)",
                path.display()
            ));
        }
        let client_id = self.settings.client_id.clone().unwrap_or_default();
        let client = Registration {
            client_id: client_id.clone(),
            client_secret: None,
            client_secret_expires_at: None,
            token_endpoint_auth_method: "none".into(),
            redirect_uri: None,
        };
        let answer = self
            .jwt_bearer(found, &assertion, &client, scope, key.as_ref())
            .await
            .map_err(|failure| {
                let refused = matches!(failure, TokenFailure::Dead(_));
                let e = failure.into_message();
                let why = format!(
                    "the authorization server did not accept the workload token from {}: {e}; no other grant is tried",
                    path.display()
                );
                // A refusal stands until the file holds another token; an outage does not.
                if refused {
                    *self.refused_assertion.lock().expect("refusal lock") =
                        Some((fingerprint, why.clone()));
                }
                why
            })?;
        self.keep_login(
            answer,
            found,
            &client_id,
            scope,
            "a workload identity token",
            key.as_ref(),
        )
    }

    /// The JWT bearer token request at the discovered authorization server: the
    /// assertion, the client's authentication (or its bare `client_id` when it has none),
    /// the scope and the resource.
    pub(super) async fn jwt_bearer(
        &self,
        found: &Discovered,
        assertion: &Secret,
        client: &Registration,
        scope: Option<&str>,
        key: Option<&DpopKey>,
    ) -> Result<TokenAnswer, TokenFailure> {
        let resource = self.resource_for(found);
        let mut form = vec![("grant_type", GRANT), ("assertion", assertion.expose())];
        if !client.client_id.is_empty() {
            form.push(("client_id", &client.client_id));
        }
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        if let Some(resource) = resource.as_deref() {
            form.push(("resource", resource));
        }
        self.token_request_at(found, form, client, key).await
    }
}

/// Reads a JWT kept in a file (a workload token, an ID token): trimmed, at most `max`
/// bytes (`--max-credential-file`), three base64url parts. Errors name the file and the
/// flag, never the content.
pub fn read_jwt_file(path: &Path, flag: &str, max: u64) -> Result<Secret, String> {
    let shown = path.display();
    // Read at most one byte past the bound, so a file that grows (or a pipe) cannot make
    // us read more than that.
    let file =
        std::fs::File::open(path).map_err(|e| format!("{flag}: cannot read {shown}: {e}"))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, max + 1), &mut text)
        .map_err(|e| format!("{flag}: cannot read {shown}: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!(
            "{flag}: {shown} is larger than --max-credential-file ({max} bytes); a JWT is far smaller"
        ));
    }
    let token = text.trim();
    let parts: Vec<&str> = token.split('.').collect();
    let base64url = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if parts.len() != 3 || !base64url(parts[0]) || !base64url(parts[1]) {
        return Err(format!(
            "{flag}: {shown} does not hold a JWT (three base64url parts separated by dots)"
        ));
    }
    Ok(Secret::new(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwt_file_is_read_trimmed_and_anything_else_is_refused_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3In0.c2ln\n").unwrap();
        let max = 4096;
        let token = read_jwt_file(&path, "--workload-token-file", max).unwrap();
        assert_eq!(token.expose(), "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3In0.c2ln");
        std::fs::write(&path, "not-a-jwt-secret-value").unwrap();
        let e = read_jwt_file(&path, "--workload-token-file", max).unwrap_err();
        assert!(
            e.contains("does not hold a JWT") && !e.contains("secret-value"),
            "{e}"
        );
        std::fs::write(&path, vec![b'a'; max as usize + 1]).unwrap();
        let e = read_jwt_file(&path, "--workload-token-file", max).unwrap_err();
        assert!(
            e.contains("larger than --max-credential-file (4096 bytes)"),
            "{e}"
        );
        let absent = dir.path().join("absent");
        let e = read_jwt_file(&absent, "--idp-id-token-file", max).unwrap_err();
        assert!(e.starts_with("--idp-id-token-file: cannot read"), "{e}");
    }
}
