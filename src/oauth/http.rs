//! HTTP for OAuth: requests to any origin (each with its own proxy route), the same CA
//! and timeout settings as MCP traffic, bodies capped, and never a redirect followed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use url::Url;

use crate::http::client::{ClientOptions, HttpClient};
use crate::http::sse::root_cause;

/// A response read whole.
#[derive(Debug)]
pub struct Fetched {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

pub struct OAuthHttp {
    options: ClientOptions,
    max_body: usize,
    read_timeout: Duration,
    clients: Mutex<HashMap<String, HttpClient>>,
}

/// Client credentials sent with HTTP Basic (`client_secret_basic`).
pub struct BasicAuth<'a> {
    pub client_id: &'a str,
    pub client_secret: &'a str,
}

impl OAuthHttp {
    pub fn new(options: ClientOptions, max_body: usize) -> Self {
        let read_timeout = options.read_timeout.unwrap_or(Duration::from_secs(30));
        OAuthHttp {
            options,
            max_body,
            read_timeout,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// GETs a JSON document. Errors are strings that name the URL's origin only.
    pub async fn get_json(&self, url: &Url) -> Result<Fetched, String> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        // What the TypeScript SDK sends, and some servers vary their metadata by it.
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        self.send(Method::GET, url, headers, Bytes::new()).await
    }

    /// POSTs a form (token, registration-free endpoints), optionally with Basic auth.
    pub async fn post_form(
        &self,
        url: &Url,
        form: &[(&str, &str)],
        basic: Option<BasicAuth<'_>>,
    ) -> Result<Fetched, String> {
        self.post_form_with(url, form, basic, HeaderMap::new())
            .await
    }

    /// [`OAuthHttp::post_form`] with `extra` headers (a DPoP proof).
    pub async fn post_form_with(
        &self,
        url: &Url,
        form: &[(&str, &str)],
        basic: Option<BasicAuth<'_>>,
        extra: HeaderMap,
    ) -> Result<Fetched, String> {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut headers = extra;
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        if let Some(basic) = basic {
            headers.insert(AUTHORIZATION, basic_auth(&basic));
        }
        self.send(Method::POST, url, headers, Bytes::from(body))
            .await
    }

    /// GETs a JSON document with a bearer token (OpenID Connect UserInfo); the header is
    /// marked sensitive, so it is never logged.
    pub async fn get_json_with_bearer(
        &self,
        url: &Url,
        token: &crate::secret::Secret,
    ) -> Result<Fetched, String> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| "the access token is not a valid header value".to_owned())?;
        bearer.set_sensitive(true);
        headers.insert(AUTHORIZATION, bearer);
        self.send(Method::GET, url, headers, Bytes::new()).await
    }

    /// POSTs a JSON document (Dynamic Client Registration).
    pub async fn post_json(&self, url: &Url, json: &serde_json::Value) -> Result<Fetched, String> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = Bytes::from(serde_json::to_vec(json).expect("a JSON value serializes"));
        self.send(Method::POST, url, headers, body).await
    }

    async fn send(
        &self,
        method: Method,
        url: &Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Fetched, String> {
        let origin = url.origin().ascii_serialization();
        let uri: Uri = url
            .as_str()
            .parse()
            .map_err(|e| format!("{origin}: not a usable URL ({e})"))?;
        let client = self.client_for(&origin, &uri)?;
        let mut response = client
            .send(method, &uri, headers, body, Some(self.read_timeout))
            .await
            .map_err(|e| format!("{origin}: {}", root_cause(&e)))?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("{origin}: {}", root_cause(&e)))?
        {
            if body.len() + chunk.len() > self.max_body {
                return Err(format!(
                    "{origin}: the answer exceeds {} bytes",
                    self.max_body
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            status,
            headers,
            body,
        })
    }

    fn client_for(&self, origin: &str, uri: &Uri) -> Result<HttpClient, String> {
        let mut clients = self.clients.lock().expect("oauth clients lock");
        if let Some(client) = clients.get(origin) {
            return Ok(client.clone());
        }
        let client = HttpClient::build(&self.options, uri)?.without_redirects();
        clients.insert(origin.to_owned(), client.clone());
        Ok(client)
    }
}

/// RFC 6749 §2.3.1: both parts form-encoded before Base64.
fn basic_auth(basic: &BasicAuth<'_>) -> HeaderValue {
    use base64::Engine;
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!(
        "{}:{}",
        encode(basic.client_id),
        encode(basic.client_secret)
    );
    let mut value = HeaderValue::from_str(&format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    ))
    .expect("Base64 is a valid header value");
    value.set_sensitive(true);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_form_encodes_both_parts() {
        let value = basic_auth(&BasicAuth {
            client_id: "a b",
            client_secret: "p:w",
        });
        use base64::Engine;
        let raw = value.to_str().unwrap().strip_prefix("Basic ").unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(raw)
            .unwrap();
        assert_eq!(decoded, b"a+b:p%3Aw");
        assert!(value.is_sensitive());
    }
}
