//! Token revocation at logout (RFC 7009): the refresh token (which ends the whole grant at
//! most servers), else the access token. Best effort: the local copy is deleted anyway.

use url::Url;

use super::http::{BasicAuth, OAuthHttp};
use super::store::{Grant, Registration};
use crate::secret::Secret;

/// Revokes `grant` at its server's revocation endpoint, if it has one. `Ok(false)` when
/// there is nothing to call.
pub async fn revoke(
    http: &OAuthHttp,
    grant: &Grant,
    client: Option<&Registration>,
) -> Result<bool, String> {
    let Some(endpoint) = grant.revocation_endpoint.as_deref() else {
        return Ok(false);
    };
    let endpoint = Url::parse(endpoint).map_err(|e| format!("bad revocation endpoint ({e})"))?;
    let (token, hint): (&Secret, &str) = match &grant.refresh_token {
        Some(refresh) => (refresh, "refresh_token"),
        None => (&grant.access_token, "access_token"),
    };
    let mut form = vec![("token", token.expose()), ("token_type_hint", hint)];
    let secret = client
        .and_then(|c| c.client_secret.as_ref())
        .map(Secret::expose);
    let method = client.map_or("none", |c| c.token_endpoint_auth_method.as_str());
    let basic = match (method, secret) {
        ("client_secret_basic", Some(secret)) => Some(BasicAuth {
            client_id: &grant.client_id,
            client_secret: secret,
        }),
        ("client_secret_post", Some(secret)) => {
            form.push(("client_id", &grant.client_id));
            form.push(("client_secret", secret));
            None
        }
        _ => {
            form.push(("client_id", &grant.client_id));
            None
        }
    };
    let fetched = http.post_form(&endpoint, &form, basic).await?;
    // RFC 7009 §2.2: 200 for a revoked token and for one the server did not know.
    if fetched.status.is_success() {
        Ok(true)
    } else {
        Err(format!(
            "the revocation endpoint answered HTTP {}",
            fetched.status
        ))
    }
}
