//! Relay mode: a stdio MCP server for the host on one side, a Streamable HTTP client of the
//! remote server on the other. The loop here reads stdin and dispatches; each request runs
//! as its own task, so nothing waits behind a slow call.

mod call;
mod cancel;
pub mod detect;
pub mod exchange;
pub mod gate;
mod input;
mod lane;
mod listen;
mod methods;
mod parked;
mod passthrough;
mod route;
mod server_stream;
mod sse_link;
mod to_legacy;
mod to_modern;
mod tool_headers;
pub mod transport;
pub mod upstream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderMap;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use url::Url;

use crate::era::Era;
use crate::http::client::ClientOptions;
use crate::jsonrpc::error::{INVALID_REQUEST, PARSE_ERROR, UPSTREAM_ERROR, error_response};
use crate::jsonrpc::framing::{Frame, LineReader, trimmed};
use crate::jsonrpc::message::{self, IdKey, Invalid, Kind};
use crate::jsonrpc::stdio::StdioModes;
use crate::jsonrpc::writer::{self, Outbox};
use detect::{EraChoice, Eras, UpstreamEra};
use exchange::Call;
use gate::{Failure, Gate, Registered, Sink};
use lane::Lane;
use upstream::Upstream;

/// Everything the relay needs, already validated. Built by `cli`; the relay never sees flags.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub url: Url,
    /// `-H` headers and the bearer token (marked sensitive), sent on every request.
    pub headers: HeaderMap,
    pub client: ClientOptions,
    /// Idle limit of the long-lived GET stream; `None` disables it.
    pub sse_read_timeout: Option<Duration>,
    pub max_message_size: usize,
    pub max_in_flight: usize,
    pub cancel_filter: bool,
    pub cancel_ttl: Duration,
    pub max_retries: u32,
    pub retry_after_cap: Duration,
    /// Consecutive failed attempts to resume or reopen a stream before giving up.
    pub max_reconnects: u32,
    pub shutdown_grace: Duration,
    /// OAuth for this server: `None` when a static Authorization is configured.
    pub oauth: Option<crate::oauth::RelayOAuth>,
    /// `--protocol-era`.
    pub protocol_era: EraChoice,
    /// `--transport`.
    pub transport: transport::TransportChoice,
    /// Input rounds a modern server may ask of a legacy host in one call.
    pub max_input_rounds: u32,
    /// How long the host may take to answer one of those questions.
    pub input_timeout: Duration,
}

/// State shared by the reader loop and every request task.
pub struct Relay {
    pub config: RelayConfig,
    pub upstream: Upstream,
    pub gate: Gate,
    tasks: TaskTracker,
    server_stream: Mutex<Option<tokio::task::AbortHandle>>,
    this: std::sync::Weak<Relay>,
    /// Which era each side speaks.
    pub eras: Eras,
    /// Streamable HTTP or HTTP+SSE, decided once.
    pub transports: transport::Transports,
    /// The HTTP+SSE stream and its endpoint, when that transport is used.
    sse: sse_link::SseLink,
    /// A modern server's tools, for their `Mcp-Param-*` headers.
    tools: tool_headers::ToolHeaders,
    /// Requests the relay put to the host, waiting for its answers.
    host_requests: input::HostRequests,
    /// Translation state for a legacy host in front of a modern server.
    legacy_host: to_modern::LegacyHost,
    /// Translation state for a modern host in front of a legacy server.
    modern_host: to_legacy::ModernHost,
    /// Legacy server calls waiting for a modern host's input.
    parked: parked::Parked,
    /// Fired when shutdown begins, so long-lived subscriptions can end gracefully.
    closing: CancellationToken,
    next_id: AtomicU64,
}

impl Relay {
    /// A strong handle to this relay, for work that outlives the caller's borrow.
    pub fn handle(&self) -> Option<Arc<Relay>> {
        self.this.upgrade()
    }

    /// A fresh id for a request of the relay's own making: unique for the process, and in
    /// a namespace no host uses (`mcp-stdio-…`).
    pub fn next_upstream_id(&self, kind: &str) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        format!("mcp-stdio-{kind}-{n}")
    }

    /// From now on, what the server sends outside the host's calls (the session's stream)
    /// is handled for a modern host instead of being copied to stdout.
    fn divert_server_messages(&self) {
        let (tx, rx) = mpsc::channel(256);
        if self.gate.divert(tx)
            && let Some(relay) = self.handle()
        {
            tokio::spawn(to_legacy::serve_server_messages(relay, rx));
        }
    }

    /// (Re)starts the GET stream for the current session, replacing any older one. (The
    /// HTTP+SSE transport has its own stream, kept by its link.)
    pub fn restart_server_stream(&self) {
        if self.transports.is_sse() {
            return;
        }
        let Some(relay) = self.this.upgrade() else {
            return;
        };
        let task = tokio::spawn(server_stream::run(relay)).abort_handle();
        if let Some(old) = self
            .server_stream
            .lock()
            .expect("stream lock")
            .replace(task)
        {
            old.abort();
        }
    }

    fn stop_server_stream(&self) {
        if let Some(task) = self.server_stream.lock().expect("stream lock").take() {
            task.abort();
        }
    }
}

/// Why the reader loop stopped.
enum Stop {
    EndOfInput,
    Signal(&'static str),
    OutputClosed,
    InputError(std::io::Error),
}

/// Runs the relay until stdin ends or a signal arrives; returns the process exit code.
pub async fn run(config: RelayConfig) -> i32 {
    // Dropped last: puts stdin and stdout back in blocking mode for whoever shares them.
    let mut stdio = StdioModes::default();
    let (outbox, mut writer_ended) = writer::spawn(stdio.output(), 1024);
    let upstream = match Upstream::new(&config) {
        Ok(upstream) => upstream,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    tracing::info!(upstream = %upstream.display_url(), "relaying stdio to Streamable HTTP");
    let gate = Gate::new(
        outbox.clone(),
        config.cancel_filter,
        config.cancel_ttl,
        config.max_in_flight,
    );
    let eras = Eras::new(config.protocol_era);
    let transports = transport::Transports::new(config.transport);
    let relay = Arc::new_cyclic(|this| Relay {
        config,
        upstream,
        gate,
        tasks: TaskTracker::new(),
        server_stream: Mutex::new(None),
        this: this.clone(),
        eras,
        transports,
        sse: Default::default(),
        tools: Default::default(),
        host_requests: Default::default(),
        legacy_host: Default::default(),
        modern_host: Default::default(),
        parked: Default::default(),
        closing: CancellationToken::new(),
        next_id: AtomicU64::new(0),
    });
    let (lane, lane_task) = Lane::spawn(relay.clone(), 256);
    let mut reader = LineReader::new(stdio.input(), relay.config.max_message_size);
    let mut signals = std::pin::pin!(crate::shutdown::signal());

    let stop = loop {
        tokio::select! {
            biased;
            name = &mut signals => break Stop::Signal(name),
            _ = &mut writer_ended => break Stop::OutputClosed,
            frame = reader.next() => match frame {
                Ok(Some(frame)) => dispatch(&relay, &lane, frame).await,
                Ok(None) => break Stop::EndOfInput,
                Err(e) => break Stop::InputError(e),
            },
        }
    };
    match &stop {
        Stop::EndOfInput => tracing::debug!("stdin closed; shutting down"),
        Stop::Signal(name) => tracing::info!(signal = name, "shutting down"),
        Stop::OutputClosed => tracing::info!("stdout closed; shutting down"),
        Stop::InputError(e) => tracing::warn!(error = %e, "cannot read stdin; shutting down"),
    }
    shut_down(&relay, lane, lane_task, &outbox).await;
    0
}

/// Lets in-flight work finish within the grace period, answers what is left, ends the
/// upstream session and flushes stdout.
async fn shut_down(
    relay: &Arc<Relay>,
    lane: Lane,
    lane_task: tokio::task::JoinHandle<()>,
    outbox: &Outbox,
) {
    let grace = relay.config.shutdown_grace;
    relay.closing.cancel();
    drop(lane);
    relay.tasks.close();
    let finished = tokio::time::timeout(grace, async {
        relay.tasks.wait().await;
        let _ = lane_task.await;
        relay.gate.drained().await;
    })
    .await;
    if finished.is_err() {
        tracing::info!(
            grace_s = grace.as_secs_f64(),
            "in-flight requests did not finish within the shutdown grace"
        );
    }
    let failure = Failure::upstream("the relay shut down before the upstream answered");
    relay.gate.fail_all(&failure).await;
    relay.stop_server_stream();
    relay.upstream.delete_session(Duration::from_secs(2)).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), outbox.flush()).await;
}

/// Handles one line from the host.
async fn dispatch(relay: &Arc<Relay>, lane: &Lane, frame: Frame) {
    let out = relay.gate.outbox();
    let line = match frame {
        Frame::TooLong => {
            let message = format!(
                "message exceeds --max-message-size ({} bytes) and was skipped",
                relay.config.max_message_size
            );
            out.send(error_response("null", INVALID_REQUEST, &message, None))
                .await;
            return;
        }
        Frame::Line(line) => line,
    };
    let Some(content) = trimmed(&line) else {
        return;
    };
    let content = line.slice_ref(content);
    if message::is_batch(&content) {
        dispatch_batch(relay, lane, content).await;
    } else {
        dispatch_one(relay, lane, content, Sink::Stdout).await;
    }
}

/// Handles one message. Its answer goes to `sink`; returns whether an answer will come.
async fn dispatch_one(relay: &Arc<Relay>, lane: &Lane, content: Bytes, sink: Sink) -> bool {
    let parsed = match message::parse(&content) {
        Ok(parsed) => parsed,
        Err(invalid) => {
            reject(relay, invalid, sink).await;
            return true;
        }
    };
    match parsed.kind {
        Kind::Request => {
            let raw_id = parsed.id.expect("requests have ids").get().to_owned();
            let id = IdKey::from_raw(parsed.id.expect("requests have ids")).expect("validated id");
            let method = parsed.method.as_deref().unwrap_or_default().to_owned();
            let claims_modern = detect::claims_modern(parsed.params);
            let host_era = relay.eras.note_host_request(&method, claims_modern);
            if method == "initialize" && !claims_modern {
                relay.upstream.remember_host_initialize(parsed.params);
                relay.legacy_host.remember_initialize(parsed.params);
            }
            match relay.gate.register(id.clone(), &raw_id, sink) {
                Registered::Ok => {}
                Registered::Duplicate => {
                    let message = format!(
                        "request id {raw_id} is already in flight; ids must be unique among pending requests"
                    );
                    relay
                        .gate
                        .outbox()
                        .send(error_response(&raw_id, INVALID_REQUEST, &message, None))
                        .await;
                    return false;
                }
                Registered::Full => {
                    let message = format!(
                        "the relay already has --max-in-flight ({}) requests waiting; retry when some have finished",
                        relay.config.max_in_flight
                    );
                    relay
                        .gate
                        .outbox()
                        .send(error_response(&raw_id, UPSTREAM_ERROR, &message, None))
                        .await;
                    return false;
                }
            }
            let call = Call {
                id: id.clone(),
                raw_id,
                method,
                line: content.clone(),
            };
            let task = relay
                .tasks
                .spawn(serve_request(relay.clone(), call, host_era));
            relay.gate.attach(&id, task.abort_handle());
            true
        }
        Kind::Notification => {
            let method = parsed.method.as_deref().unwrap_or_default();
            let cancelled = (method == "notifications/cancelled")
                .then(|| message::cancelled_request_id(parsed.params))
                .flatten();
            let upstream = relay.eras.upstream_known().map(|u| u.era());
            match (relay.eras.host(), upstream) {
                // A modern server gets no notifications: cancelling closes the request's
                // stream, and nothing else a host sends has a meaning there.
                (_, Some(Era::Modern)) | (Some(Era::Modern), None) => {
                    if let Some(id) = &cancelled {
                        relay.gate.cancel(id).await;
                    }
                    if method == "notifications/initialized"
                        && let Some(UpstreamEra::Modern { version, discover }) =
                            relay.eras.upstream_known()
                    {
                        let capabilities = discover.as_ref().and_then(|d| d.get("capabilities"));
                        relay
                            .legacy_host
                            .listens
                            .start(relay, &version, capabilities);
                    }
                }
                // A modern host before a legacy server: the cancel goes upstream under the
                // id the relay sent the request with.
                (Some(Era::Modern), Some(Era::Legacy)) => {
                    if let Some(id) = &cancelled {
                        if let Some(upstream_id) = relay.modern_host.upstream_id_of(id) {
                            let line = format!(
                                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{upstream_id}}}}}"#
                            );
                            lane.push(Bytes::from(line)).await;
                        }
                        relay.gate.cancel(id).await;
                    }
                }
                _ => {
                    if let Some(id) = &cancelled {
                        relay.gate.cancel(id).await;
                    }
                    if method == "notifications/initialized" {
                        // Sent in line, before anything read after it: some servers refuse
                        // requests that arrive before initialization is complete.
                        if lane::deliver(relay, content).await {
                            relay.restart_server_stream();
                        }
                    } else {
                        lane.push(content).await;
                    }
                }
            }
            false
        }
        Kind::Response => {
            // An answer to a question the relay itself asked the host?
            if let Some(id) = parsed.id.and_then(IdKey::from_raw)
                && relay.host_requests.answer(&id, content.to_vec())
            {
                return false;
            }
            match relay.eras.upstream_known() {
                Some(UpstreamEra::Modern { .. }) => {
                    tracing::warn!(
                        "dropped an answer from the host that matches no question of the relay's"
                    );
                }
                _ => lane.push(content).await,
            }
            false
        }
    }
}

/// Serves one host request on the path its era and the upstream's call for.
async fn serve_request(relay: Arc<Relay>, call: Call, host: Option<Era>) {
    // HTTP+SSE is the 2024-11-05 transport: handshake era only, no probe.
    if relay.transports.is_sse() {
        if host == Some(Era::Modern) {
            let failure = Failure::upstream(
                "the upstream speaks the 2024-11-05 HTTP+SSE transport, which has only the initialize handshake; a 2026-07-28 host needs a Streamable HTTP server",
            );
            relay.gate.fail(&call.id, &failure).await;
            return;
        }
        exchange::serve(relay, call).await;
        return;
    }
    let known = relay.eras.upstream_known();
    let upstream = match known {
        Some(known) => Ok(Some(known)),
        None => detect::upstream_era(&relay, &probe_capabilities(&call)).await,
    };
    let upstream = match upstream {
        Ok(upstream) => upstream,
        Err(failure) => {
            relay.gate.fail(&call.id, &failure).await;
            return;
        }
    };
    match (host.unwrap_or(Era::Legacy), upstream) {
        (Era::Legacy, None | Some(UpstreamEra::Legacy)) => exchange::serve(relay, call).await,
        (Era::Modern, None | Some(UpstreamEra::Modern { .. })) => {
            passthrough::serve(relay, call).await
        }
        (Era::Legacy, Some(UpstreamEra::Modern { version, discover })) => {
            to_modern::serve(relay, call, version, discover).await
        }
        (Era::Modern, Some(UpstreamEra::Legacy)) => to_legacy::serve(relay, call).await,
    }
}

/// The capabilities the era probe declares: the host's own, as far as this request tells
/// (an `initialize` or a modern envelope), else none.
fn probe_capabilities(call: &Call) -> serde_json::Value {
    let Ok(parsed) = message::parse(&call.line) else {
        return serde_json::json!({});
    };
    if let Ok(Some(claim)) = crate::era::envelope::read_claim(parsed.params) {
        return claim.capabilities;
    }
    parsed
        .params
        .filter(|_| call.method == "initialize")
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
        .and_then(|p| p.get("capabilities").cloned())
        .map(|c| crate::era::bridge::capabilities_for_modern(&c))
        .unwrap_or_else(|| serde_json::json!({}))
}

async fn reject(relay: &Relay, invalid: Invalid, sink: Sink) {
    let line = match invalid {
        Invalid::NotJson(detail) => {
            tracing::debug!(%detail, "the host sent a line that is not JSON");
            error_response(
                "null",
                PARSE_ERROR,
                "Parse error: the line is not valid JSON",
                None,
            )
        }
        Invalid::NotMessage { reason, id } => {
            let message = format!("Invalid Request: {reason}");
            error_response(
                id.as_deref().unwrap_or("null"),
                INVALID_REQUEST,
                &message,
                None,
            )
        }
    };
    match sink {
        Sink::Stdout => {
            relay.gate.outbox().send(line).await;
        }
        Sink::Batch(tx) => {
            let _ = tx.send(Some(line));
        }
    }
}

/// A JSON-RPC batch (2025-03-26 hosts): each element is relayed on its own, and the
/// answers go back together as one array, as JSON-RPC requires.
async fn dispatch_batch(relay: &Arc<Relay>, lane: &Lane, content: Bytes) {
    let out = relay.gate.outbox();
    let items = match message::split_batch(&content) {
        Ok(items) if items.is_empty() => {
            out.send(error_response(
                "null",
                INVALID_REQUEST,
                "Invalid Request: an empty batch",
                None,
            ))
            .await;
            return;
        }
        Ok(items) => items
            .into_iter()
            .map(|item| content.slice_ref(item.get().as_bytes()))
            .collect::<Vec<_>>(),
        Err(_) => {
            out.send(error_response(
                "null",
                PARSE_ERROR,
                "Parse error: the batch is not valid JSON",
                None,
            ))
            .await;
            return;
        }
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut expected = 0;
    for item in items {
        if dispatch_one(relay, lane, item, Sink::Batch(tx.clone())).await {
            expected += 1;
        }
    }
    drop(tx);
    if expected == 0 {
        return;
    }
    let out = out.clone();
    relay.tasks.spawn(async move {
        let mut answers = Vec::with_capacity(expected);
        while answers.len() < expected {
            match rx.recv().await {
                Some(Some(answer)) => answers.push(answer),
                Some(None) => expected -= 1,
                None => break,
            }
        }
        if !answers.is_empty() {
            out.send(join_batch(&answers)).await;
        }
    });
}

fn join_batch(answers: &[Vec<u8>]) -> Vec<u8> {
    let mut line = Vec::with_capacity(answers.iter().map(|a| a.len() + 1).sum::<usize>() + 1);
    line.push(b'[');
    for (i, answer) in answers.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        line.extend_from_slice(answer);
    }
    line.push(b']');
    line
}
