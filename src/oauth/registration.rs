//! Who the relay is at an authorization server: a client given on the command line, a
//! registration cached for that issuer, or a new Dynamic Client Registration (RFC 7591)
//! as a native application with a loopback redirect.

use serde::Deserialize;
use serde_json::json;
use url::Url;

use super::authorize::sanitized;
use super::http::OAuthHttp;
use super::store::Registration;
use crate::secret::Secret;

/// The token endpoint authentication method to use: the first the server supports of
/// `none` (public client), `client_secret_post`, `client_secret_basic`; with a secret,
/// the secret-carrying methods come first.
pub fn choose_auth_method(supported: &[String], has_secret: bool) -> String {
    let order: &[&str] = if has_secret {
        &["client_secret_basic", "client_secret_post", "none"]
    } else {
        &["none", "client_secret_post", "client_secret_basic"]
    };
    order
        .iter()
        .find(|m| supported.iter().any(|s| s == *m))
        .map_or_else(|| order[0].to_owned(), |m| (*m).to_owned())
}

/// Whether a cached registration may still be used at `now` (its secret, if it expires,
/// has not).
pub fn still_valid(registration: &Registration, now: u64) -> bool {
    registration
        .client_secret_expires_at
        .is_none_or(|at| at == 0 || at > now)
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<Secret>,
    client_secret_expires_at: Option<u64>,
    token_endpoint_auth_method: Option<String>,
}

#[derive(Deserialize)]
struct Refused {
    error: Option<String>,
}

/// Registers the relay at `endpoint`: for the browser flow with `redirect_uri`, for the
/// device flow (RFC 8628) without one. The method the server assigns wins over the one asked.
pub async fn register(
    http: &OAuthHttp,
    endpoint: &Url,
    redirect_uri: Option<&str>,
    auth_method: &str,
    scope: Option<&str>,
) -> Result<Registration, String> {
    let mut body = match redirect_uri {
        Some(redirect_uri) => json!({
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }),
        None => json!({
            "grant_types": [super::device::GRANT_TYPE, "refresh_token"],
            "response_types": [],
        }),
    };
    body["client_name"] = json!("mcp-stdio");
    body["application_type"] = json!("native");
    body["token_endpoint_auth_method"] = json!(auth_method);
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        body["scope"] = json!(scope);
    }
    let fetched = http.post_json(endpoint, &body).await?;
    if !fetched.status.is_success() {
        let reason = serde_json::from_slice::<Refused>(&fetched.body)
            .ok()
            .and_then(|r| r.error)
            .map_or_else(|| format!("HTTP {}", fetched.status), |e| sanitized(&e));
        return Err(format!(
            "the authorization server refused to register this client ({reason}); register one by hand and pass --client-id"
        ));
    }
    let registered: Registered = serde_json::from_slice(&fetched.body)
        .map_err(|e| format!("the registration answer is unreadable ({e})"))?;
    Ok(Registration {
        client_id: registered.client_id,
        client_secret: registered.client_secret,
        client_secret_expires_at: registered.client_secret_expires_at,
        token_endpoint_auth_method: registered
            .token_endpoint_auth_method
            .unwrap_or_else(|| auth_method.to_owned()),
        redirect_uri: redirect_uri.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_method_follows_the_server_and_the_secret() {
        let all = strings(&["client_secret_basic", "client_secret_post", "none"]);
        assert_eq!(choose_auth_method(&all, false), "none");
        assert_eq!(choose_auth_method(&all, true), "client_secret_basic");
        assert_eq!(
            choose_auth_method(&strings(&["client_secret_post"]), false),
            "client_secret_post"
        );
        assert_eq!(choose_auth_method(&[], false), "none");
    }

    #[test]
    fn an_expired_secret_means_register_again() {
        let mut registration = Registration {
            client_id: "c".into(),
            client_secret: Some(Secret::new("s")),
            client_secret_expires_at: Some(100),
            token_endpoint_auth_method: "client_secret_post".into(),
            redirect_uri: None,
        };
        assert!(still_valid(&registration, 99));
        assert!(!still_valid(&registration, 100));
        registration.client_secret_expires_at = Some(0);
        assert!(still_valid(&registration, u64::MAX));
    }
}
