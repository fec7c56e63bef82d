//! A request body that remembers whether it was read to its end, so that a response given
//! before then (a 401, a 403, a 404, a 413) leaves the connection fit for the client's
//! next request: the small rest of the body is read and dropped, or the response says
//! `Connection: close`.
//!
//! Why: hyper answers, then reads only what of an unread body already sits in its buffer,
//! and closes the connection if more was due, without telling the client. A client that
//! sent its headers and body in two writes (httpx does) then reuses a connection that is
//! closing under it, and its next request fails with "Server disconnected without sending
//! a response". Every OAuth client meets this on its first request, which gets a 401
//! (WORKAROUNDS.md 52).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT};
use http::{HeaderValue, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;

/// A request as the handlers see it.
pub type Request = http::Request<Inbound>;

/// The body of a request, reporting its end to the [`Unread`] that watches it.
pub struct Inbound {
    body: Option<Incoming>,
    shared: Arc<Shared>,
}

struct Shared {
    ended: AtomicBool,
    /// The body, handed back when a handler drops it unread.
    left: Mutex<Option<Incoming>>,
}

/// What the connection loop keeps of a request while a handler has it.
pub struct Unread {
    shared: Arc<Shared>,
    /// `Content-Length`, when the client declared one.
    declared: Option<u64>,
    /// `Expect: 100-continue`: the client waits for a word before it sends the body, so
    /// there is nothing to drain.
    expects_continue: bool,
}

/// Wraps a request's body, and returns what tells afterwards whether it was read.
pub fn watch(request: http::Request<Incoming>) -> (Request, Unread) {
    let (parts, body) = request.into_parts();
    let shared = Arc::new(Shared {
        ended: AtomicBool::new(body.is_end_stream()),
        left: Mutex::new(None),
    });
    let unread = Unread {
        shared: shared.clone(),
        declared: parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok()),
        expects_continue: parts
            .headers
            .get(EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue")),
    };
    let body = Inbound {
        body: Some(body),
        shared,
    };
    (http::Request::from_parts(parts, body), unread)
}

impl Unread {
    /// The response, made safe for the connection: when the body was not read to its end,
    /// its rest is read and dropped if it was declared at most `most` bytes and arrives
    /// within `within`; otherwise the response closes the connection.
    pub async fn settle<B>(
        self,
        mut response: Response<B>,
        most: u64,
        within: Duration,
    ) -> Response<B> {
        if self.shared.ended.load(Ordering::Acquire) {
            return response;
        }
        let left = self.shared.left.lock().expect("inbound lock").take();
        let drainable = !self.expects_continue && self.declared.is_some_and(|n| n <= most);
        let drained = match left {
            Some(body) if drainable => drain(body, most, within).await,
            // Still held (a task reads it yet), too large, or of unknown length.
            _ => false,
        };
        if !drained {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// Reads a body to its end, dropping it; false when it is larger than `most` or slower
/// than `within`.
async fn drain(body: Incoming, most: u64, within: Duration) -> bool {
    let limited = http_body_util::Limited::new(body, most as usize);
    matches!(
        tokio::time::timeout(within, limited.collect()).await,
        Ok(Ok(_))
    )
}

impl HttpBody for Inbound {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.shared.ended.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        if let Some(body) = self.body.take()
            && !self.shared.ended.load(Ordering::Acquire)
        {
            if body.is_end_stream() {
                self.shared.ended.store(true, Ordering::Release);
            } else {
                *self.shared.left.lock().expect("inbound lock") = Some(body);
            }
        }
    }
}
