//! Dispatch: every line from the host goes to the gate and then to the path its era and
//! the upstream's call for; notifications and the host's answers go to the lane. Each
//! request runs as its own task, so nothing waits behind a slow call.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::context::Ctx;
use super::detect;
use super::eras::UpstreamEra;
use super::gate::{Failure, Registered, Sink};
use super::lane::Lane;
use super::paths::modern_host::ToLegacy;
use super::paths::to_modern::ToModern;
use super::paths::{legacy, passthrough, to_legacy, to_modern};
use super::request::Call;
use crate::era::Era;
use crate::jsonrpc::error::{INVALID_REQUEST, PARSE_ERROR, UPSTREAM_ERROR, error_response};
use crate::jsonrpc::framing::{Frame, trimmed};
use crate::jsonrpc::message::{self, IdKey, Invalid, Kind, Message};
use crate::trace_context::TraceContext;

/// The relay: the request context every task gets, the state of the two translating paths,
/// and the tasks in flight.
pub struct Relay {
    pub ctx: Arc<Ctx>,
    to_modern: Arc<ToModern>,
    to_legacy: Arc<ToLegacy>,
    pub tasks: TaskTracker,
}

impl Relay {
    pub fn new(ctx: Arc<Ctx>) -> Arc<Self> {
        Arc::new(Relay {
            to_modern: ToModern::new(ctx.clone()),
            to_legacy: ToLegacy::new(ctx.clone()),
            ctx,
            tasks: TaskTracker::new(),
        })
    }
}

/// Handles one line from the host.
pub async fn dispatch(relay: &Arc<Relay>, lane: &Lane, frame: Frame) {
    let out = relay.ctx.gate.outbox();
    let line = match frame {
        Frame::TooLong => {
            let message = format!(
                "message exceeds --max-message-size ({} bytes) and was skipped",
                relay.ctx.config.max_message_size
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
        Kind::Request => request(relay, &content, &parsed, sink).await,
        Kind::Notification => {
            notification(relay, lane, &content, &parsed).await;
            false
        }
        Kind::Response => {
            response(relay, lane, &content, &parsed).await;
            false
        }
    }
}

/// A host request: registered at the gate (or refused there), then served on its own
/// task. Returns whether an answer will come to `sink`.
async fn request(relay: &Arc<Relay>, content: &Bytes, parsed: &Message<'_>, sink: Sink) -> bool {
    let raw_id = parsed.id.expect("requests have ids").get().to_owned();
    let id = IdKey::from_raw(parsed.id.expect("requests have ids")).expect("validated id");
    let method = parsed.method.as_deref().unwrap_or_default().to_owned();
    let claims_modern = detect::claims_modern(parsed.params);
    let host_era = relay.ctx.eras.note_host_request(&method, claims_modern);
    if method == "initialize" && !claims_modern {
        relay
            .ctx
            .link
            .upstream
            .remember_host_initialize(parsed.params);
        relay.to_modern.remember_initialize(parsed.params);
    }
    let (audit, traced) = match relay.ctx.gate.audit(&method, &raw_id, parsed.params).await {
        Ok(audit) => audit,
        Err(_) => {
            let message = "the audit log cannot keep up (--audit-when-full refuse): nothing unaudited runs; try again shortly";
            relay
                .ctx
                .gate
                .outbox()
                .send(error_response(&raw_id, UPSTREAM_ERROR, message, None))
                .await;
            return true;
        }
    };
    match relay.ctx.gate.register(id.clone(), &raw_id, sink, audit) {
        Registered::Ok => {}
        Registered::Duplicate => {
            let message = format!(
                "request id {raw_id} is already in flight; ids must be unique among pending requests"
            );
            relay
                .ctx
                .gate
                .outbox()
                .send(error_response(&raw_id, INVALID_REQUEST, &message, None))
                .await;
            return false;
        }
        Registered::Full => {
            let message = format!(
                "the relay already has --max-in-flight ({}) requests waiting; retry when some have finished",
                relay.ctx.config.max_in_flight
            );
            relay
                .ctx
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
        params: parsed
            .params
            .map(|params| content.slice_ref(params.get().as_bytes())),
        line: content.clone(),
    };
    // Boxed here, once: the future holds the whole HTTP exchange (kilobytes), and
    // spawning it unboxed copies it through every frame of the spawn.
    // The request's log lines name the trace it is in: the relay's span's when it made one
    // (a new trace when the host sent none), else the one the host's `_meta` names.
    let trace_id = traced
        .as_ref()
        .and_then(crate::telemetry::trace_id_of)
        .or_else(|| TraceContext::in_message(content).map(|t| t.trace_id().to_owned()));
    let span = match trace_id {
        Some(trace_id) => tracing::info_span!("request", trace_id = %trace_id),
        None => tracing::Span::none(),
    };
    let serving =
        tracing::Instrument::instrument(serve_request(relay.clone(), call, host_era), span);
    let task = match traced {
        // Inside the relay's OpenTelemetry span, so what goes upstream carries it.
        Some(context) => {
            relay
                .tasks
                .spawn(Box::pin(opentelemetry::context::FutureExt::with_context(
                    serving, context,
                )))
        }
        None => relay.tasks.spawn(Box::pin(serving)),
    };
    relay.ctx.gate.attach(&id, task.abort_handle());
    true
}

/// A host notification: a cancel closes the request it names (and goes upstream under the
/// id the relay used), `initialized` goes in line; the rest to a handshake-era server.
async fn notification(relay: &Arc<Relay>, lane: &Lane, content: &Bytes, parsed: &Message<'_>) {
    let method = parsed.method.as_deref().unwrap_or_default();
    let cancelled = (method == "notifications/cancelled")
        .then(|| message::cancelled_request_id(parsed.params))
        .flatten();
    let upstream = relay.ctx.eras.upstream_known().map(|u| u.era());
    match (relay.ctx.eras.host(), upstream) {
        // A modern server gets no notifications: cancelling closes the request's
        // stream, and nothing else a host sends has a meaning there.
        (_, Some(Era::Modern)) | (Some(Era::Modern), None) => {
            if let Some(id) = &cancelled {
                relay.ctx.gate.cancel(id).await;
            }
            if method == "notifications/initialized"
                && let Some(UpstreamEra::Modern { version, discover }) =
                    relay.ctx.eras.upstream_known()
            {
                let capabilities = discover.as_ref().and_then(|d| d.get("capabilities"));
                relay.to_modern.start_listening(&version, capabilities);
            }
        }
        // A modern host before a legacy server: the cancel goes upstream under the
        // id the relay sent the request with.
        (Some(Era::Modern), Some(Era::Legacy)) => {
            if let Some(id) = &cancelled {
                if let Some(upstream_id) = relay.to_legacy.upstream_id_of(id) {
                    let line = format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{upstream_id}}}}}"#
                    );
                    lane.push(Bytes::from(line)).await;
                }
                relay.ctx.gate.cancel(id).await;
            }
        }
        _ => {
            if let Some(id) = &cancelled {
                relay.ctx.gate.cancel(id).await;
            }
            if method == "notifications/initialized" {
                // Sent in line, before anything read after it: some servers refuse
                // requests that arrive before initialization is complete.
                if relay.ctx.link.deliver(content.clone()).await {
                    relay.ctx.restart_server_stream();
                }
            } else {
                lane.push(content.clone()).await;
            }
        }
    }
}

/// A host answer: to the relay's own question, or to the server's.
async fn response(relay: &Arc<Relay>, lane: &Lane, content: &Bytes, parsed: &Message<'_>) {
    // An answer to a question the relay itself asked the host?
    if let Some(id) = parsed.id.and_then(IdKey::from_raw)
        && relay.ctx.host_requests.answer(&id, content.to_vec())
    {
        return;
    }
    match relay.ctx.eras.upstream_known() {
        Some(UpstreamEra::Modern { .. }) => {
            tracing::warn!(
                "dropped an answer from the host that matches no question of the relay's"
            );
        }
        _ => lane.push(content.clone()).await,
    }
}

/// Serves one host request on the path its era and the upstream's call for.
async fn serve_request(relay: Arc<Relay>, call: Call, host: Option<Era>) {
    // HTTP+SSE is the 2024-11-05 transport: handshake era only, no probe.
    if relay.ctx.link.transports.is_sse() {
        serve_over_sse(&relay, call, host).await;
        return;
    }
    let known = relay.ctx.eras.upstream_known();
    let upstream = match known {
        Some(known) => Ok(Some(known)),
        None => {
            let modern_host = host == Some(Era::Modern);
            detect::upstream_era(&relay.ctx, &probe_capabilities(&call), modern_host).await
        }
    };
    let upstream = match upstream {
        Ok(upstream) => upstream,
        Err(failure) => {
            relay.ctx.gate.fail(&call.id, &failure).await;
            return;
        }
    };
    // The probe itself may have found an HTTP+SSE server.
    if relay.ctx.link.transports.is_sse() {
        serve_over_sse(&relay, call, host).await;
        return;
    }
    match (host.unwrap_or(Era::Legacy), upstream) {
        (Era::Legacy, None | Some(UpstreamEra::Legacy)) => {
            legacy::serve(relay.ctx.clone(), call).await
        }
        (Era::Modern, None | Some(UpstreamEra::Modern { .. })) => {
            passthrough::serve(relay.ctx.clone(), call).await
        }
        (Era::Legacy, Some(UpstreamEra::Modern { version, discover })) => {
            to_modern::serve(relay.to_modern.clone(), call, version, discover).await
        }
        (Era::Modern, Some(UpstreamEra::Legacy)) => {
            to_legacy::serve(relay.to_legacy.clone(), call).await
        }
    }
}

/// A request to an HTTP+SSE server, which speaks only the handshake era. A 2026-07-28 host's
/// `server/discover` is refused as a legacy server refuses it (`-32601`), so a host in auto
/// mode falls back to `initialize`; its other requests are refused saying why.
async fn serve_over_sse(relay: &Arc<Relay>, call: Call, host: Option<Era>) {
    if host != Some(Era::Modern) {
        legacy::serve(relay.ctx.clone(), call).await;
        return;
    }
    let failure = if call.method == "server/discover" {
        Failure {
            code: crate::jsonrpc::error::METHOD_NOT_FOUND,
            message: "Method not found: the upstream is a 2024-11-05 HTTP+SSE server, which speaks only the initialize handshake; send initialize".into(),
            data: None,
        }
    } else {
        Failure::upstream(
            "the upstream speaks the 2024-11-05 HTTP+SSE transport, which has only the initialize handshake; a 2026-07-28 host needs a Streamable HTTP server (or send initialize)",
        )
    };
    relay.ctx.gate.fail(&call.id, &failure).await;
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
            relay.ctx.gate.outbox().send(line).await;
        }
        Sink::Batch(tx) => {
            let _ = tx.send(Some(line));
        }
    }
}

/// A JSON-RPC batch (2025-03-26 hosts): each element is relayed on its own, and the
/// answers go back together as one array, as JSON-RPC requires.
async fn dispatch_batch(relay: &Arc<Relay>, lane: &Lane, content: Bytes) {
    let out = relay.ctx.gate.outbox();
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
