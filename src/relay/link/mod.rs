//! The link tier: how the relay reaches its upstream, whatever the transport. One `Link`
//! owns the Streamable HTTP session (`session`), the 2024-11-05 HTTP+SSE link (`sse`), the
//! transport decision (`transport`), the standalone GET stream (`server_stream`) and the
//! one way every path reads a response (`response`). Nothing here knows which era a host
//! speaks or how its requests are translated; what arrives unasked goes to the gate.

pub mod response;
pub mod server_stream;
pub mod session;
pub mod sse;
pub mod transport;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::task::AbortHandle;
use url::Url;

use crate::relay::config::RelayConfig;
use crate::relay::gate::Gate;
use session::Upstream;
use transport::Transports;

pub struct Link {
    /// The Streamable HTTP session; HTTP+SSE POSTs go through it too (to their endpoint).
    pub upstream: Upstream,
    /// Streamable HTTP or HTTP+SSE, decided once.
    pub transports: Transports,
    /// Where answers and server messages that arrive on a stream are delivered.
    pub gate: Arc<Gate>,
    /// The HTTP+SSE stream and its endpoint, when that transport is used.
    sse: sse::SseLink,
    server_stream: Mutex<Option<AbortHandle>>,
    /// The server URL (the HTTP+SSE endpoint is resolved against it).
    url: Url,
    max_reconnects: u32,
    connect_timeout: Duration,
    this: Weak<Link>,
}

impl Link {
    pub fn new(config: &RelayConfig, gate: Arc<Gate>) -> Result<Arc<Self>, String> {
        let upstream = Upstream::new(config)?;
        Ok(Arc::new_cyclic(|this| Link {
            upstream,
            transports: Transports::new(config.transport),
            gate,
            sse: Default::default(),
            server_stream: Mutex::new(None),
            url: config.url.clone(),
            max_reconnects: config.max_reconnects,
            connect_timeout: config.client.connect_timeout,
            this: this.clone(),
        }))
    }

    /// A strong handle, for work that outlives the caller's borrow.
    pub fn handle(&self) -> Option<Arc<Link>> {
        self.this.upgrade()
    }

    pub fn is_sse(&self) -> bool {
        self.transports.is_sse()
    }

    /// (Re)starts the GET stream for the current session, replacing any older one. (The
    /// HTTP+SSE transport has its own stream, kept by its link.)
    pub fn restart_server_stream(&self) {
        if self.is_sse() {
            return;
        }
        let Some(link) = self.handle() else {
            return;
        };
        let task = tokio::spawn(server_stream::run(link)).abort_handle();
        if let Some(old) = self
            .server_stream
            .lock()
            .expect("stream lock")
            .replace(task)
        {
            old.abort();
        }
    }

    pub fn stop_server_stream(&self) {
        if let Some(task) = self.server_stream.lock().expect("stream lock").take() {
            task.abort();
        }
    }

    /// POSTs one message that gets no answer (a notification, or the host's answer to a
    /// server request), on whichever transport is in use; a lost session is re-established
    /// once. Failures are logged: there is nobody to answer.
    pub async fn deliver(&self, message: Bytes) -> bool {
        if self.is_sse()
            && let Some(link) = self.handle()
        {
            return sse::deliver(&link, message).await;
        }
        for attempt in 0..2 {
            let posted = match self.upstream.post(message.clone(), false, true).await {
                Ok(posted) => posted,
                Err(failure) => {
                    tracing::warn!(problem = %failure.message, "could not deliver a notification or answer to the upstream");
                    return false;
                }
            };
            let status = posted.response.status();
            if status == StatusCode::NOT_FOUND && posted.carried_session && attempt == 0 {
                if let Err(failure) = self.upstream.reinitialize(posted.generation).await {
                    tracing::warn!(problem = %failure.message, "could not re-establish the upstream session");
                    return false;
                }
                self.restart_server_stream();
                continue;
            }
            if status.is_success() {
                return true;
            }
            tracing::warn!(%status, "the upstream refused a notification or answer");
            return false;
        }
        false
    }

    /// [`Link::deliver`] without waiting for it: the caller is reading a stream that must
    /// not stall behind the POST.
    pub fn deliver_aside(&self, message: Bytes) {
        if let Some(link) = self.handle() {
            tokio::spawn(async move {
                link.deliver(message).await;
            });
        }
    }
}
