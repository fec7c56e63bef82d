//! Forwarding a request to the replica that owns its session or parked round: a pooled
//! HTTP/1.1 client of its own (never through an outbound proxy: replicas reach each other
//! directly), at most `--peer-max-connections` forwards at once (a forwarded stream holds
//! its slot until it ends), `--peer-timeout` to connect, and the owner's answer streamed
//! back as it comes.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue, Method, Request, Response};
use http_body::{Body as HttpBody, Frame};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ClusterConfig;
use super::peer::PEER_HEADER;

/// Why a forward got no answer from the owner.
#[derive(Debug)]
pub enum Failure {
    /// `--peer-max-connections` forwards are already open.
    Busy(usize),
    /// The owner cannot be reached: it is gone (or was never there).
    Gone(String),
    /// The owner did not begin to answer in time.
    Timeout,
    /// The owner's connection failed mid-way.
    Failed(String),
}

impl Failure {
    /// The `/metrics` label.
    pub fn outcome(&self) -> &'static str {
        match self {
            Failure::Busy(_) => "busy",
            Failure::Gone(_) => "owner_gone",
            Failure::Timeout => "timeout",
            Failure::Failed(_) => "failed",
        }
    }
}

pub struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
    slots: Arc<Semaphore>,
    max: usize,
    head_timeout: Duration,
}

impl Forwarder {
    pub fn new(config: &ClusterConfig, response_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.peer_timeout));
        connector.set_nodelay(true);
        // A peer that vanishes without a word is noticed on a long-lived stream too.
        connector.set_keepalive(Some(Duration::from_secs(30)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(config.peer_max_connections)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        Forwarder {
            client,
            slots: Arc::new(Semaphore::new(config.peer_max_connections)),
            max: config.peer_max_connections,
            // The owner itself answers 504 after --timeout-response; this only covers an
            // owner that stopped answering altogether.
            head_timeout: response_timeout + config.peer_timeout,
        }
    }

    /// Sends `method path_and_query` with `body` to `owner` (`http://host:port`), with the
    /// client's headers minus the hop-by-hop ones and its credentials, plus the
    /// introduction; returns the owner's answer, its body streamed through.
    pub async fn send(
        &self,
        owner: &str,
        method: Method,
        path_and_query: &str,
        client_headers: &HeaderMap,
        introduction: HeaderValue,
        body: Bytes,
    ) -> Result<Response<Body>, Failure> {
        let permit = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| Failure::Busy(self.max))?;
        let uri: http::Uri = format!("{owner}{path_and_query}")
            .parse()
            .map_err(|e| Failure::Failed(format!("the owner's address {owner:?}: {e}")))?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        for (name, value) in client_headers {
            if passes(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        headers.insert(PEER_HEADER, introduction);
        let sent = tokio::time::timeout(self.head_timeout, self.client.request(request));
        let response = match sent.await {
            Err(_) => return Err(Failure::Timeout),
            Ok(Err(e)) if e.is_connect() => return Err(Failure::Gone(cause(&e))),
            Ok(Err(e)) => return Err(Failure::Failed(cause(&e))),
            Ok(Ok(response)) => response,
        };
        let (mut parts, body) = response.into_parts();
        parts.headers.retain_hop_free();
        Ok(Response::from_parts(
            parts,
            Body::new(Held {
                body,
                _slot: permit,
            }),
        ))
    }

    /// Forwards open now (for tests and `/metrics`).
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }
}

/// Whether a client's header goes on to the owner. Hop-by-hop headers stay on their hop;
/// the bearer stays here (the introduction says who the caller is); `Host` is the owner's;
/// a client's own `mcp-stdio-peer` is never passed on.
fn passes(name: &HeaderName) -> bool {
    !(is_hop_by_hop(name)
        || name == header::HOST
        || name == header::AUTHORIZATION
        || name == header::CONTENT_LENGTH
        || name == header::COOKIE
        || name.as_str() == PEER_HEADER)
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

trait RetainHopFree {
    fn retain_hop_free(&mut self);
}

impl RetainHopFree for HeaderMap {
    fn retain_hop_free(&mut self) {
        let names: Vec<HeaderName> = self
            .keys()
            .filter(|name| is_hop_by_hop(name))
            .cloned()
            .collect();
        for name in names {
            self.remove(name);
        }
    }
}

fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = e;
    while let Some(next) = deepest.source() {
        deepest = next;
    }
    deepest.to_string()
}

/// The owner's body, holding its forwarding slot until it ends or the client goes away.
struct Held {
    body: Incoming,
    _slot: OwnedSemaphorePermit,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_hop_by_hop_headers_stay_on_this_hop() {
        for name in [
            "authorization",
            "host",
            "connection",
            "transfer-encoding",
            "content-length",
            "cookie",
            "proxy-authorization",
            PEER_HEADER,
        ] {
            assert!(!passes(&HeaderName::from_static(name)), "{name}");
        }
        for name in [
            "mcp-session-id",
            "last-event-id",
            "accept",
            "content-type",
            "mcp-protocol-version",
            "mcp-method",
        ] {
            assert!(passes(&HeaderName::from_static(name)), "{name}");
        }
    }

    #[tokio::test]
    async fn forwards_beyond_the_bound_are_refused_and_a_gone_owner_is_told_apart() {
        let mut config = ClusterConfig::with_key(
            "a-cluster-key-of-more-than-thirty-two-bytes-AAAA",
            "http://127.0.0.1:1",
        )
        .unwrap();
        config.peer_max_connections = 1;
        let forwarder = Forwarder::new(&config, Duration::from_secs(2));
        // An owner that accepts and answers the head of a stream, then stays quiet.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let owner = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut buffer = [0u8; 4096];
            let _ = socket.read(&mut buffer).await;
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let get = |owner: String| {
            let forwarder = &forwarder;
            async move {
                let intro = HeaderValue::from_static("x");
                let none = HeaderMap::new();
                forwarder
                    .send(&owner, Method::GET, "/mcp", &none, intro, Bytes::new())
                    .await
            }
        };
        let stream = get(owner.clone()).await.expect("the owner answers");
        assert_eq!(forwarder.open(), 1, "an open stream holds its slot");
        assert!(
            !stream.headers().contains_key("transfer-encoding"),
            "hop-by-hop headers are not passed back"
        );
        let busy = get(owner).await.unwrap_err();
        assert!(matches!(busy, Failure::Busy(1)), "{busy:?}");
        drop(stream);
        assert_eq!(forwarder.open(), 0, "the slot is back when the stream ends");
        // A port nobody listens on: the owner is gone.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gone = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let failure = get(gone).await.unwrap_err();
        assert!(matches!(failure, Failure::Gone(_)), "{failure:?}");
        assert_eq!(failure.outcome(), "owner_gone");
    }
}
