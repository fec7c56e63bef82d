//! An upstream response whose body reads time out, and the one error type of the HTTP layer
//! (which says whether the request provably never left: the relay's retry rules need that).

use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http::{HeaderMap, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong with one exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No connection could be made: the request was never sent.
    Connect,
    /// No connection within the connect timeout: the request was never sent.
    ConnectTimeout,
    /// Nothing arrived within the read timeout.
    Timeout,
    /// The connection failed after the request may have been sent.
    Transfer,
    /// The redirect chain was too long.
    Redirects,
}

#[derive(Debug)]
pub struct HttpError {
    kind: ErrorKind,
    source: Option<BoxError>,
}

impl HttpError {
    pub fn new(kind: ErrorKind, source: impl Into<BoxError>) -> Self {
        HttpError {
            kind,
            source: Some(source.into()),
        }
    }

    pub fn timeout() -> Self {
        HttpError {
            kind: ErrorKind::Timeout,
            source: None,
        }
    }

    pub fn too_many_redirects(max: usize) -> Self {
        HttpError::new(ErrorKind::Redirects, format!("more than {max} redirects"))
    }

    /// Classifies a failure of hyper-util's client.
    pub fn from_client(e: hyper_util::client::legacy::Error) -> Self {
        let kind = if e.is_connect() && caused_by_elapsed(&e) {
            ErrorKind::ConnectTimeout
        } else if e.is_connect() {
            ErrorKind::Connect
        } else {
            ErrorKind::Transfer
        };
        HttpError::new(kind, e)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True when the request provably never left (so it is always safe to retry).
    pub fn is_connect(&self) -> bool {
        matches!(self.kind, ErrorKind::Connect | ErrorKind::ConnectTimeout)
    }

    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.kind {
            ErrorKind::Connect => "cannot connect",
            ErrorKind::ConnectTimeout => "connect timed out",
            ErrorKind::Timeout => "timed out waiting for data",
            ErrorKind::Transfer => "the connection failed",
            ErrorKind::Redirects => "too many redirects",
        })
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Whether a timer ran out somewhere in `e`'s chain. hyper-util reports its connect
/// timeout as an `io::Error` of kind `TimedOut` (wrapping tokio's `Elapsed`).
fn caused_by_elapsed(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(e) = current {
        let timed_out = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if timed_out || e.is::<tokio::time::error::Elapsed>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// A response from the upstream. Its body is read a chunk at a time, each read bounded by
/// the read timeout the request was sent with.
pub struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
    read_timeout: Option<Duration>,
}

impl Response {
    pub fn new(response: http::Response<Incoming>, read_timeout: Option<Duration>) -> Self {
        let (parts, body) = response.into_parts();
        Response {
            status: parts.status,
            headers: parts.headers,
            body,
            read_timeout,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body's length when the upstream announced it.
    pub fn content_length(&self) -> Option<u64> {
        self.body.size_hint().exact()
    }

    /// The next piece of the body; `None` at its end. Trailers are skipped.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            let frame = match self.read_timeout {
                Some(limit) => tokio::time::timeout(limit, self.body.frame())
                    .await
                    .map_err(|_| HttpError::timeout())?,
                None => self.body.frame().await,
            };
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(HttpError::new(ErrorKind::Transfer, e)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The body as a stream of chunks.
    pub fn bytes_stream(self) -> impl Stream<Item = Result<Bytes, HttpError>> + Send + 'static {
        futures_util::stream::unfold(Some(self), |response| async move {
            let mut response = response?;
            match response.chunk().await {
                Ok(Some(data)) => Some((Ok(data), Some(response))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        })
    }
}
