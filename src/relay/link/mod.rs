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

use crate::http::response::Response;
use crate::relay::config::RelayConfig;
use crate::relay::gate::{Failure, Gate};
use session::{Upstream, Wire};
use transport::{Transport, Transports};

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

    /// POSTs one message on the Streamable HTTP session. A 404 to a request that carried
    /// the session id means the server no longer knows the session and did not run the
    /// request: the session is re-established (the host's own `initialize` replayed) and
    /// the message sent once more. Every POST of the relay's goes through here.
    pub async fn post(
        &self,
        body: Bytes,
        wire: &Wire<'_>,
        replay_safe: bool,
    ) -> Result<Response, Failure> {
        let mut recovered = false;
        loop {
            let posted = self
                .upstream
                .post_as(body.clone(), wire, replay_safe)
                .await?;
            if posted.response.status() == StatusCode::NOT_FOUND
                && posted.carried_session
                && !recovered
            {
                self.upstream.reinitialize(posted.generation).await?;
                self.restart_server_stream();
                recovered = true;
                continue;
            }
            return Ok(posted.response);
        }
    }

    /// `--transport auto`: what the status of a host request's POST tells about the
    /// transport, until it is decided. Returns true when the server turned out to be a
    /// 2024-11-05 HTTP+SSE server (its GET named an endpoint): the request must be sent
    /// over that link instead.
    pub async fn learn_transport(&self, status: StatusCode) -> bool {
        if self.transports.may_fall_back(status.as_u16()) {
            if let Some(link) = self.handle()
                && sse::try_fall_back(&link).await
            {
                self.transports.decide(
                    Transport::Sse,
                    &format!("the POST got HTTP {status} and the GET opened an HTTP+SSE stream"),
                );
                return true;
            }
            self.transports.decide(
                Transport::StreamableHttp,
                &format!(
                    "the POST got HTTP {status}, and the server offers no HTTP+SSE stream either"
                ),
            );
        } else if status.is_success() {
            self.transports.decide(
                Transport::StreamableHttp,
                "the server answered a Streamable HTTP POST",
            );
        }
        false
    }

    /// POSTs one message that gets no answer (a notification, or the host's answer to a
    /// server request), on whichever transport is in use. Failures are logged: there is
    /// nobody to answer.
    pub async fn deliver(&self, message: Bytes) -> bool {
        if self.is_sse()
            && let Some(link) = self.handle()
        {
            return sse::deliver(&link, message).await;
        }
        let wire = Wire::Legacy { initialize: false };
        match self.post(message, &wire, true).await {
            Ok(response) if response.status().is_success() => true,
            Ok(response) => {
                tracing::warn!(status = %response.status(), "the upstream refused a notification or answer");
                false
            }
            Err(failure) => {
                tracing::warn!(problem = %failure.message, "could not deliver a notification or answer to the upstream");
                false
            }
        }
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
