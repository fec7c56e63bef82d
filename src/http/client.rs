//! The HTTP client of the data path: hyper-util's pooled client over our connector (proxy
//! route, TLS with the platform's roots plus `--ca-cert`), with per-request read timeouts
//! and a redirect policy that only follows 307/308 on the same origin.
//!
//! Why not reqwest here: on every request reqwest parses the URL twice more (its redirect
//! layer and its response) and runs two tower layers we do not use; measured on the
//! benchmark, that was a quarter of the relay's CPU per call. Everything it did for us
//! (proxies from the environment, platform roots, timeouts, redirects) is below, built from
//! the same crates reqwest uses.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{LOCATION, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::connect::{Dial, Route, TcpOptions};
use super::response::{HttpError, Response};

/// How the client should behave; filled from the command line by `cli`.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    /// The longest gap between two reads of one response; `None` means no limit.
    pub read_timeout: Option<Duration>,
    /// Extra trusted roots (`--ca-cert`), already read and parsed.
    pub extra_roots: Vec<CertificateDer<'static>>,
}

/// The most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;
const AGENT: HeaderValue =
    HeaderValue::from_static(concat!("mcp-stdio/", env!("CARGO_PKG_VERSION")));

/// A pooled client for one upstream origin.
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpsConnector<Dial>, Full<Bytes>>,
    proxy_auth: Option<HeaderValue>,
    follow_redirects: bool,
}

impl HttpClient {
    /// Builds the client for requests to `upstream`'s origin. Proxy variables are read
    /// now; the system's trusted roots are loaded only for an https upstream.
    pub fn build(options: &ClientOptions, upstream: &Uri) -> Result<Self, String> {
        let route = Route::for_upstream(upstream)?;
        let proxy_auth = route.request_auth().cloned();
        let tcp = TcpOptions {
            connect_timeout: options.connect_timeout,
            keepalive: Duration::from_secs(60),
            keepalive_interval: Duration::from_secs(15),
            keepalive_retries: 4,
        };
        let tls = tls_config(upstream.scheme_str() == Some("https"), &options.extra_roots)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(Dial::new(route, &tcp));
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        Ok(HttpClient {
            inner,
            proxy_auth,
            follow_redirects: true,
        })
    }

    /// The same client, returning every redirect to the caller instead of following it
    /// (OAuth: a redirect from a metadata or token endpoint is an SSRF vector).
    pub fn without_redirects(mut self) -> Self {
        self.follow_redirects = false;
        self
    }

    /// Sends one request and returns the response head. `read_timeout` bounds the wait
    /// for the head and then every body read (`None`: no bound, for long-lived streams).
    pub async fn send(
        &self,
        method: Method,
        uri: &Uri,
        mut headers: HeaderMap,
        body: Bytes,
        read_timeout: Option<Duration>,
    ) -> Result<Response, HttpError> {
        headers.entry(USER_AGENT).or_insert(AGENT);
        if let Some(auth) = &self.proxy_auth {
            headers.insert(PROXY_AUTHORIZATION, auth.clone());
        }
        let mut target = uri.clone();
        for hop in 0.. {
            let mut request = http::Request::new(Full::new(body.clone()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = target.clone();
            *request.headers_mut() = headers.clone();
            let sent = self.inner.request(request);
            let response = match read_timeout {
                Some(limit) => tokio::time::timeout(limit, sent)
                    .await
                    .map_err(|_| HttpError::timeout())?,
                None => sent.await,
            }
            .map_err(HttpError::from_client)?;
            if let Some(next) = same_origin_redirect(&target, &response)
                && self.follow_redirects
            {
                if hop == MAX_REDIRECTS {
                    return Err(HttpError::too_many_redirects(MAX_REDIRECTS));
                }
                tracing::debug!(status = %response.status(), "following a same-origin redirect");
                target = next;
                continue;
            }
            return Ok(Response::new(response, read_timeout));
        }
        unreachable!("the redirect loop returns")
    }
}

/// Load balancers answer 307/308 to move a client between equivalent endpoints; following
/// those on the same origin is safe (the body and credentials stay with the same server).
/// Anything else (another origin, or 301/302/303, which would turn a POST into a GET) is
/// returned to the caller, which surfaces it to the host as an error.
fn same_origin_redirect<B>(from: &Uri, response: &http::Response<B>) -> Option<Uri> {
    if !matches!(response.status().as_u16(), 307 | 308) {
        return None;
    }
    let location = response.headers().get(LOCATION)?.to_str().ok()?;
    let base = url::Url::parse(&from.to_string()).ok()?;
    let next = base.join(location).ok()?;
    if next.origin() != base.origin() {
        return None;
    }
    next.as_str().parse().ok()
}

/// TLS settings: the platform's verifier (the OS trust store) plus `--ca-cert`, offering
/// HTTP/2 and HTTP/1.1. For a plain-HTTP upstream TLS is never used (redirects stay on the
/// origin), so the trust store is not loaded: that costs milliseconds at every start.
pub fn tls_config(
    upstream_is_https: bool,
    extra_roots: &[CertificateDer<'static>],
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    if !upstream_is_https {
        return Ok(builder
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth());
    }
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra_roots.to_vec(), provider)
            .map_err(|e| format!("cannot load the system's trusted certificates: {e}"))?;
    Ok(builder
        .dangerous() // not dangerous: this is the platform's own verifier
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// Parses the `--ca-cert` bundle, so a bad file fails at startup with a clear message.
pub fn parse_extra_roots(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--ca-cert: not a PEM certificate bundle ({e})"))?;
    if certs.is_empty() {
        return Err("--ca-cert: the file holds no PEM certificate".into());
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redirect(status: u16, location: &str) -> http::Response<()> {
        http::Response::builder()
            .status(status)
            .header(LOCATION, location)
            .body(())
            .unwrap()
    }

    #[test]
    fn follows_only_307_and_308_on_the_same_origin() {
        let from: Uri = "http://h:1/mcp?x=1".parse().unwrap();
        let next = same_origin_redirect(&from, &redirect(307, "/v2/mcp")).unwrap();
        assert_eq!(next.to_string(), "http://h:1/v2/mcp");
        assert!(same_origin_redirect(&from, &redirect(308, "http://h:1/other")).is_some());
        assert!(same_origin_redirect(&from, &redirect(302, "/v2/mcp")).is_none());
        assert!(same_origin_redirect(&from, &redirect(307, "http://evil:1/mcp")).is_none());
        assert!(same_origin_redirect(&from, &redirect(307, "https://h:1/mcp")).is_none());
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        assert!(parse_extra_roots(b"not a certificate").is_err());
    }
}
