//! One pinned fetch of a Client ID Metadata Document: the host is resolved once, every
//! address must be public, the connection goes to a vetted address (so a second DNS answer
//! cannot swap in another), TLS is verified against the system's roots for the URL's host,
//! no redirect is followed, and size and time are capped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use url::Url;

use super::address::is_public;

/// What a fetch may do.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Production: only `https`. (Tests of the document rules use plain HTTP.)
    pub require_https: bool,
    /// Production: every resolved address must be public.
    pub public_only: bool,
    pub max_bytes: usize,
    /// The whole fetch: resolve, connect, TLS, request and body.
    pub deadline: Duration,
}

impl Policy {
    pub fn strict() -> Self {
        Policy {
            require_https: true,
            public_only: true,
            max_bytes: 5 * 1024,
            deadline: Duration::from_secs(10),
        }
    }
}

#[derive(Debug)]
pub enum Fetched {
    /// A 200 with this body, and the `max-age` it allowed.
    Document(Bytes, Option<Duration>),
    /// 404 or 410: the client withdrew its document.
    Withdrawn,
    /// Refused before any byte was sent (an address that is not public, a scheme).
    Refused(String),
    /// The server could not be reached, or answered something else.
    Failed(String),
}

pub async fn fetch(url: &Url, policy: &Policy, tls: Arc<rustls::ClientConfig>) -> Fetched {
    match tokio::time::timeout(policy.deadline, attempt(url, policy, tls)).await {
        Ok(fetched) => fetched,
        Err(_) => Fetched::Failed(format!("no answer within {} s", policy.deadline.as_secs())),
    }
}

async fn attempt(url: &Url, policy: &Policy, tls: Arc<rustls::ClientConfig>) -> Fetched {
    let https = url.scheme() == "https";
    if policy.require_https && !https {
        return Fetched::Refused("a client id URL must be https".into());
    }
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Fetched::Refused("the client id URL has no host".into());
    };
    let bare = host.trim_matches(['[', ']']);
    let addresses: Vec<SocketAddr> = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => match tokio::net::lookup_host((bare, port)).await {
            Ok(found) => found.collect(),
            Err(e) => return Fetched::Failed(format!("cannot resolve {host}: {e}")),
        },
    };
    if addresses.is_empty() {
        return Fetched::Failed(format!("{host} has no address"));
    }
    if policy.public_only
        && let Some(inner) = addresses.iter().find(|a| !is_public(a.ip()))
    {
        return Fetched::Refused(format!(
            "{host} resolves to {}, which is not a public address",
            inner.ip()
        ));
    }
    let mut last_error = String::new();
    for address in &addresses {
        let stream = match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => stream,
            Err(e) => {
                last_error = format!("cannot connect to {address}: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        return if https {
            let name = match rustls::pki_types::ServerName::try_from(bare.to_owned()) {
                Ok(name) => name,
                Err(_) => return Fetched::Refused(format!("'{host}' is not a TLS server name")),
            };
            match tokio_rustls::TlsConnector::from(tls.clone())
                .connect(name, stream)
                .await
            {
                Ok(tls_stream) => request(url, TokioIo::new(tls_stream), policy).await,
                Err(e) => Fetched::Failed(format!("TLS with {host} failed: {e}")),
            }
        } else {
            request(url, TokioIo::new(stream), policy).await
        };
    }
    Fetched::Failed(last_error)
}

async fn request<T>(url: &Url, io: T, policy: &Policy) -> Fetched
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = match hyper::client::conn::http1::handshake(io).await {
        Ok(pair) => pair,
        Err(e) => return Fetched::Failed(format!("HTTP failed: {e}")),
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let authority = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let request = http::Request::get(path)
        .header(http::header::HOST, authority)
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("mcp-stdio/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .expect("a valid request");
    let response = match sender.send_request(request).await {
        Ok(response) => response,
        Err(e) => return Fetched::Failed(format!("HTTP failed: {e}")),
    };
    let status = response.status();
    if status == http::StatusCode::NOT_FOUND || status == http::StatusCode::GONE {
        return Fetched::Withdrawn;
    }
    if status != http::StatusCode::OK {
        // Redirects included: a client id is the document's own URL.
        return Fetched::Failed(format!("answered {status} (only 200 is accepted)"));
    }
    let max_age = max_age(response.headers());
    match Limited::new(response.into_body(), policy.max_bytes)
        .collect()
        .await
    {
        Ok(body) => Fetched::Document(body.to_bytes(), max_age),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Fetched::Refused(format!("the document is over {} bytes", policy.max_bytes))
        }
        Err(e) => Fetched::Failed(format!("the body could not be read: {e}")),
    }
}

fn max_age(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::CACHE_CONTROL)?.to_str().ok()?;
    value.split(',').find_map(|directive| {
        let (name, seconds) = directive.trim().split_once('=')?;
        name.eq_ignore_ascii_case("max-age")
            .then(|| seconds.trim().parse().ok().map(Duration::from_secs))
            .flatten()
    })
}
