//! The OpenID provider as a client sees it: its endpoints from its metadata (the same
//! discovery as resource-server mode's, `oauth::discovery::server_metadata`), kept once found, the code exchange (client secret over HTTP
//! Basic, PKCE verifier) that yields the id_token, and UserInfo for claims a provider
//! keeps out of the id_token (OpenID Connect Core §5.4 allows that once an access token is
//! issued).

use tokio::sync::OnceCell;
use url::Url;

use crate::oauth::http::{BasicAuth, OAuthHttp};
use crate::oauth::wellknown;
use crate::secret::Secret;

const MAX_DOCUMENT: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct Endpoints {
    pub authorization: Url,
    pub token: Url,
    pub userinfo: Option<Url>,
}

/// What the code exchange returned.
pub struct Exchanged {
    pub id_token: String,
    pub access_token: Option<Secret>,
}

pub struct Provider {
    issuer: Url,
    http: OAuthHttp,
    endpoints: OnceCell<Endpoints>,
}

impl Provider {
    pub fn new(issuer: Url, http: crate::http::client::ClientOptions) -> Self {
        Provider {
            issuer,
            http: OAuthHttp::new(http, MAX_DOCUMENT),
            endpoints: OnceCell::new(),
        }
    }

    /// The endpoints, discovered on first need (a failure is retried at the next sign-in).
    pub async fn endpoints(&self) -> Result<Endpoints, String> {
        self.endpoints
            .get_or_try_init(|| self.discover())
            .await
            .cloned()
    }

    async fn discover(&self) -> Result<Endpoints, String> {
        let metadata =
            crate::oauth::discovery::server_metadata(&self.http, &self.issuer, "--login-oidc")
                .await?;
        let endpoint = |name: &str| {
            metadata[name]
                .as_str()
                .ok_or_else(|| format!("the identity provider's metadata has no {name}"))
                .and_then(|raw| wellknown::checked(raw, name))
        };
        Ok(Endpoints {
            authorization: endpoint("authorization_endpoint")?,
            token: endpoint("token_endpoint")?,
            userinfo: endpoint("userinfo_endpoint").ok(),
        })
    }

    /// Redeems the code; the id_token (and the access token, for UserInfo).
    pub async fn exchange(
        &self,
        endpoints: &Endpoints,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
        client_id: &str,
        client_secret: &Secret,
    ) -> Result<Exchanged, String> {
        let fetched = self
            .http
            .post_form(
                &endpoints.token,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", code),
                    ("redirect_uri", redirect_uri),
                    ("code_verifier", verifier),
                ],
                Some(BasicAuth {
                    client_id,
                    client_secret: client_secret.expose(),
                }),
            )
            .await?;
        let body: serde_json::Value = serde_json::from_slice(&fetched.body).unwrap_or_default();
        if !fetched.status.is_success() {
            // The provider's error code and description only: never the request.
            return Err(format!(
                "the identity provider refused the code: {} {}",
                body["error"].as_str().unwrap_or("(no error code)"),
                body["error_description"].as_str().unwrap_or("")
            ));
        }
        let id_token = body["id_token"].as_str().map(str::to_owned).ok_or(
            "the identity provider's answer has no id_token (is `openid` allowed for this client?)",
        )?;
        Ok(Exchanged {
            id_token,
            access_token: body["access_token"].as_str().map(Secret::new),
        })
    }

    /// The UserInfo claims (OpenID Connect Core §5.3).
    pub async fn userinfo(
        &self,
        endpoints: &Endpoints,
        access_token: &Secret,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        let url = endpoints
            .userinfo
            .as_ref()
            .ok_or("the identity provider publishes no userinfo_endpoint")?;
        let fetched = self.http.get_json_with_bearer(url, access_token).await?;
        if !fetched.status.is_success() {
            return Err(format!(
                "the identity provider's UserInfo answered HTTP {}",
                fetched.status
            ));
        }
        match serde_json::from_slice(&fetched.body) {
            Ok(serde_json::Value::Object(claims)) => Ok(claims),
            _ => Err("the identity provider's UserInfo answer is not a JSON object (a signed one is not supported)".into()),
        }
    }
}
