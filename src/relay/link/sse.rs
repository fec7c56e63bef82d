//! The 2024-11-05 HTTP+SSE transport: one GET stream carries everything the server sends
//! (its first `endpoint` event names where to POST), and POSTs carry what the host sends.
//! When the stream drops, every request POSTed on it that is still waiting gets an error
//! (its answer would have come on that stream), the link reconnects with backoff and
//! jitter, and the host's `initialize` is replayed out of its sight before anything else is
//! POSTed to the new endpoint.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::Uri;
use tokio::sync::{mpsc, watch};
use url::Url;

use super::Link;
use super::response::{
    is_event_stream, is_jsonrpc_error, read_capped, requested_delay, status_failure,
};
use super::session::Wire;
use crate::http::sse::{self, describe_body_error};
use crate::jsonrpc::message::{self, IdKey, Kind};
use crate::relay::gate::{Failure, Gate, Registered, Sink};
use crate::relay::route::{Routed, route};

/// Where POSTs go, as far as the stream has said.
#[derive(Debug, Clone)]
enum Endpoint {
    /// No stream yet, or between streams.
    Connecting,
    /// The endpoint of stream number `.1`.
    Ready(Uri, u64),
    /// The link gave up: every request gets this.
    Failed(String),
}

/// Ids tracked before the answered ones are pruned (the gate knows which still wait).
const POSTED_PRUNE_AT: usize = 1024;

pub struct SseLink {
    endpoint: watch::Sender<Endpoint>,
    started: AtomicBool,
    /// Streams opened so far; each endpoint belongs to one.
    streams: AtomicU64,
    /// Requests POSTed, by the stream their answer must come on.
    posted: Mutex<HashMap<IdKey, u64>>,
    next_hidden: AtomicU64,
}

impl Default for SseLink {
    fn default() -> Self {
        Self {
            endpoint: watch::channel(Endpoint::Connecting).0,
            started: AtomicBool::new(false),
            streams: AtomicU64::new(0),
            posted: Mutex::new(HashMap::new()),
            next_hidden: AtomicU64::new(0),
        }
    }
}

impl SseLink {
    /// Opens the stream (once); the link then keeps it open for the life of the process.
    pub fn start(&self, link: &Arc<Link>) {
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(run(link.clone()));
        }
    }

    /// The current endpoint and its stream, once the stream has named it (or why never).
    async fn endpoint(&self) -> Result<(Uri, u64), Failure> {
        let mut watching = self.endpoint.subscribe();
        let endpoint = watching
            .wait_for(|e| !matches!(e, Endpoint::Connecting))
            .await
            .map(|e| e.clone())
            .map_err(|_| Failure::upstream("the HTTP+SSE link has stopped"))?;
        match endpoint {
            Endpoint::Ready(uri, stream) => Ok((uri, stream)),
            Endpoint::Failed(why) => Err(Failure::upstream(why)),
            Endpoint::Connecting => unreachable!("waited for another state"),
        }
    }

    /// Whether stream `stream` is still the current one.
    fn is_current(&self, stream: u64) -> bool {
        matches!(&*self.endpoint.borrow(), Endpoint::Ready(_, s) if *s == stream)
    }

    fn note_posted(&self, gate: &Gate, id: IdKey, stream: u64) {
        let mut posted = self.posted.lock().expect("posted lock");
        if posted.len() >= POSTED_PRUNE_AT {
            posted.retain(|id, _| gate.is_waiting(id));
        }
        posted.insert(id, stream);
    }

    fn forget(&self, id: &IdKey) {
        self.posted.lock().expect("posted lock").remove(id);
    }

    /// The requests whose answers were due on stream `stream` or an older one.
    fn take_posted_on(&self, stream: u64) -> Vec<IdKey> {
        let mut posted = self.posted.lock().expect("posted lock");
        let lost: Vec<IdKey> = posted
            .iter()
            .filter(|(_, s)| **s <= stream)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &lost {
            posted.remove(id);
        }
        lost
    }
}

fn dropped(why: &str) -> Failure {
    Failure::upstream(format!(
        "the HTTP+SSE stream dropped before the answer arrived ({why}); the request may have executed; retry it"
    ))
}

/// Serves one host request over the link: POST it to the endpoint; its answer comes on the
/// stream (or, from some servers, in the POST's own body).
pub async fn exchange(
    link: &Arc<Link>,
    id: &IdKey,
    body: Bytes,
    replay_safe: bool,
) -> Result<(), Failure> {
    let state = &link.sse;
    state.start(link);
    let (endpoint, stream) = state.endpoint().await?;
    state.note_posted(&link.gate, id.clone(), stream);
    let wire = Wire::Legacy { initialize: false };
    let posted = match link
        .upstream
        .post_to(&endpoint, body, &wire, replay_safe)
        .await
    {
        Ok(posted) => posted,
        Err(failure) => {
            state.forget(id);
            return Err(failure);
        }
    };
    let response = posted.response;
    let status = response.status();
    let retry_after = requested_delay(&response);
    let body = read_capped(response, link.upstream.max_message_size())
        .await
        .unwrap_or_default();
    if status.is_success() {
        if message::parse(&body).is_ok_and(|m| m.kind == Kind::Response) {
            deliver_own(link, id, &body).await;
        }
        // Accepted while its stream dropped: the answer cannot come any more.
        if !state.is_current(stream) {
            link.gate
                .fail(id, &dropped("it dropped while the request was sent"))
                .await;
        }
        return Ok(());
    }
    state.forget(id);
    if is_jsonrpc_error(&body) && deliver_own(link, id, &body).await {
        return Ok(());
    }
    Err(status_failure(status, retry_after))
}

/// Delivers an answer found in a POST's own body, if it answers `id`; whether it did.
/// `route` has already delivered an `id: null` error itself (under `id`, leaving an empty
/// line): delivering that again would find the request answered and log a stray answer.
async fn deliver_own(link: &Arc<Link>, id: &IdKey, body: &[u8]) -> bool {
    match route(&link.gate, body, Some(id)).await {
        Routed::Own(line) if line.is_empty() => true,
        Routed::Own(line) => {
            link.gate.deliver(id, line).await;
            true
        }
        Routed::Other => false,
    }
}

/// POSTs a message that gets no answer (a notification, or the host's answer to the
/// server). Failures are logged: there is nobody to answer.
pub async fn deliver(link: &Arc<Link>, body: Bytes) -> bool {
    link.sse.start(link);
    let (endpoint, _) = match link.sse.endpoint().await {
        Ok(endpoint) => endpoint,
        Err(failure) => {
            tracing::warn!(problem = %failure.message, "could not deliver a notification or answer over HTTP+SSE");
            return false;
        }
    };
    let wire = Wire::Legacy { initialize: false };
    match link.upstream.post_to(&endpoint, body, &wire, true).await {
        Ok(posted) if posted.response.status().is_success() => true,
        Ok(posted) => {
            tracing::warn!(status = %posted.response.status(), "the upstream refused a notification or answer");
            false
        }
        Err(failure) => {
            tracing::warn!(problem = %failure.message, "could not deliver a notification or answer over HTTP+SSE");
            false
        }
    }
}

/// `auto`: after the first POST was refused with 400, 404 or 405, whether a GET to the
/// same URL opens an HTTP+SSE stream (its `endpoint` event arrives).
pub async fn try_fall_back(link: &Arc<Link>) -> bool {
    link.sse.start(link);
    link.sse.endpoint().await.is_ok()
}

/// How reading one stream ended.
struct Ended {
    /// It named an endpoint (so it counts as a connection, and resets the backoff).
    connected: bool,
    /// Not worth retrying: the server is not an HTTP+SSE server, or is misconfigured.
    fatal: bool,
    why: String,
}

/// Keeps a stream open: reads it, and after a drop fails what was waiting on it and
/// reconnects (exponential backoff with jitter, `--max-reconnects` attempts in a row).
async fn run(link: Arc<Link>) {
    let state = &link.sse;
    let mut backoff = fresh_backoff();
    let mut failures = 0;
    let mut ever_connected = false;
    loop {
        let stream = state.streams.fetch_add(1, Ordering::AcqRel) + 1;
        let ended = read_stream(&link, stream, ever_connected).await;
        state.endpoint.send_replace(Endpoint::Connecting);
        for id in state.take_posted_on(stream) {
            link.gate.fail(&id, &dropped(&ended.why)).await;
        }
        if ended.connected {
            ever_connected = true;
            failures = 0;
            backoff = fresh_backoff();
        } else {
            failures += 1;
        }
        if ended.fatal || (!ever_connected && failures > 0 && link.transports.decided().is_none()) {
            // `auto` probing a server that is not HTTP+SSE gets its answer at once.
            state
                .endpoint
                .send_replace(Endpoint::Failed(format!("HTTP+SSE: {}", ended.why)));
            return;
        }
        if failures > link.max_reconnects {
            state.endpoint.send_replace(Endpoint::Failed(format!(
                "the HTTP+SSE stream could not be re-established after {failures} attempts: {}",
                ended.why
            )));
            return;
        }
        let delay = backoff.next().unwrap_or(Duration::from_secs(30));
        tracing::info!(why = %ended.why, ?delay, "the HTTP+SSE stream ended; reconnecting");
        tokio::time::sleep(delay).await;
    }
}

/// Opens stream number `stream` and reads it until it ends.
async fn read_stream(link: &Arc<Link>, stream: u64, reconnect: bool) -> Ended {
    let not_connected = |why: String, fatal: bool| Ended {
        connected: false,
        fatal,
        why,
    };
    let response = match link.upstream.get(None, true).await {
        Ok(response) => response,
        Err(e) => return not_connected(describe_body_error(&e), false),
    };
    let status = response.status();
    if !status.is_success() || !is_event_stream(&response) {
        let why = format!(
            "GET {} answered HTTP {status}{}",
            link.upstream.display_url(),
            if status.is_success() {
                " without an event stream"
            } else {
                ""
            }
        );
        // Before any connection, a refusal means this is no HTTP+SSE server (or not one
        // that will take us): say so instead of retrying.
        return not_connected(why, !reconnect);
    }
    let mut events = sse::events(response, link.upstream.max_message_size());
    let mut have_endpoint = false;
    let first_wait = link.connect_timeout;
    loop {
        let next = if have_endpoint {
            events.next().await
        } else {
            match tokio::time::timeout(first_wait, events.next()).await {
                Ok(next) => next,
                Err(_) => {
                    return not_connected(
                        format!(
                            "the stream named no endpoint within {} s (--timeout-connect)",
                            first_wait.as_secs_f64()
                        ),
                        !reconnect,
                    );
                }
            }
        };
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                return Ended {
                    connected: have_endpoint,
                    fatal: false,
                    why: format!("the stream broke: {e}"),
                };
            }
            None => {
                return Ended {
                    connected: have_endpoint,
                    fatal: false,
                    why: "the server closed the stream".into(),
                };
            }
        };
        match event.event.as_deref() {
            Some("endpoint") => {
                let Some(data) = event.data else { continue };
                let endpoint = match resolve(&link.url, data.trim()) {
                    Ok(endpoint) => endpoint,
                    Err(why) => {
                        tracing::error!("{why}");
                        return Ended {
                            connected: have_endpoint,
                            fatal: true,
                            why,
                        };
                    }
                };
                have_endpoint = true;
                if reconnect {
                    tokio::spawn(reinitialize(link.clone(), endpoint, stream));
                } else {
                    tracing::debug!("the HTTP+SSE stream named its endpoint");
                    link.sse
                        .endpoint
                        .send_replace(Endpoint::Ready(endpoint, stream));
                }
            }
            None | Some("message") => {
                if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                    route(&link.gate, data.as_bytes(), None).await;
                }
            }
            Some(other) => tracing::debug!(event = other, "ignored an SSE event of another kind"),
        }
    }
}

/// The `endpoint` event's URI resolved against the SSE URL; refused unless it has the SSE
/// URL's origin, since the relay's credentials go with every POST.
fn resolve(sse_url: &Url, endpoint: &str) -> Result<Uri, String> {
    let resolved = sse_url
        .join(endpoint)
        .map_err(|e| format!("the HTTP+SSE endpoint event is not a URL reference ({e})"))?;
    if resolved.origin() != sse_url.origin() {
        return Err(format!(
            "refused the HTTP+SSE endpoint {}: it is on another origin than {}, and the relay's credentials go with every POST",
            resolved.origin().ascii_serialization(),
            sse_url.origin().ascii_serialization()
        ));
    }
    resolved
        .as_str()
        .parse()
        .map_err(|e| format!("the HTTP+SSE endpoint cannot be used for requests: {e}"))
}

/// A new stream after a drop: the host's `initialize` and `notifications/initialized` go to
/// the new endpoint under the relay's own id (the answer is swallowed), then the endpoint
/// is opened to the host's requests. A host that never initialized has nothing to replay.
async fn reinitialize(link: Arc<Link>, endpoint: Uri, stream: u64) {
    let state = &link.sse;
    if let Some(params) = link.upstream.host_initialize_params() {
        let n = state.next_hidden.fetch_add(1, Ordering::Relaxed) + 1;
        let raw_id = format!("\"mcp-stdio-reinit-{n}\"");
        let id = IdKey::Str(format!("mcp-stdio-reinit-{n}"));
        let (tx, mut rx) = mpsc::unbounded_channel();
        if link
            .gate
            .register(id.clone(), &raw_id, Sink::Batch(tx), None)
            != Registered::Ok
        {
            tracing::warn!("could not re-initialize over HTTP+SSE: too many requests in flight");
        } else {
            state.note_posted(&link.gate, id.clone(), stream);
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{raw_id},"method":"initialize","params":{params}}}"#
            );
            let wire = Wire::Legacy { initialize: true };
            let sent = link
                .upstream
                .post_to(&endpoint, Bytes::from(line), &wire, true)
                .await;
            let accepted = sent.is_ok_and(|p| p.response.status().is_success());
            let answer = if accepted {
                tokio::time::timeout(link.upstream.read_timeout(), rx.recv())
                    .await
                    .ok()
                    .flatten()
                    .flatten()
            } else {
                link.gate
                    .fail(&id, &Failure::upstream("not accepted"))
                    .await;
                None
            };
            state.forget(&id);
            let ok = answer.is_some_and(|a| {
                message::parse(&a).is_ok_and(|m| m.kind == Kind::Response && m.error.is_none())
            });
            if !ok {
                tracing::warn!(
                    "the replayed initialize failed after the HTTP+SSE stream reconnected; requests may be refused"
                );
            } else {
                let initialized = Bytes::from_static(
                    br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                );
                let _ = link
                    .upstream
                    .post_to(&endpoint, initialized, &wire, true)
                    .await;
                tracing::info!("the HTTP+SSE stream reconnected; the session was re-initialized");
            }
        }
    }
    // Only if no newer stream replaced this one meanwhile.
    if state.streams.load(Ordering::Acquire) == stream {
        state
            .endpoint
            .send_replace(Endpoint::Ready(endpoint, stream));
    }
}

fn fresh_backoff() -> impl Iterator<Item = Duration> {
    super::server_stream::reconnect_backoff(Duration::from_millis(500))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_against_the_sse_url_and_stay_on_its_origin() {
        let sse = Url::parse("https://mcp.example.com/v1/sse?key=1").unwrap();
        let resolve = |e: &str| resolve(&sse, e).map(|u| u.to_string());
        assert_eq!(
            resolve("/messages?sessionId=abc").unwrap(),
            "https://mcp.example.com/messages?sessionId=abc"
        );
        assert_eq!(
            resolve("messages?sessionId=abc").unwrap(),
            "https://mcp.example.com/v1/messages?sessionId=abc"
        );
        assert_eq!(
            resolve("https://mcp.example.com/m").unwrap(),
            "https://mcp.example.com/m"
        );
        for elsewhere in [
            "https://evil.example.com/m",
            "http://mcp.example.com/m",
            "https://mcp.example.com:8443/m",
            "//evil.example.com/m",
        ] {
            let refused = resolve(elsewhere).unwrap_err();
            assert!(refused.contains("another origin"), "{elsewhere}: {refused}");
        }
    }
}
