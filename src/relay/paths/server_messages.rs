//! What a legacy server sends a 2026-07-28 host besides answers: on a call's stream
//! (progress, log lines at the level the request asked for, questions for the parked
//! round, pings) and on the session's own stream (notifications for the host's
//! subscriptions; a question only when exactly one call could be asking it).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::local_listen::send_to_subscriptions;
use super::modern_host::{ModernHost, ToLegacy};
use crate::jsonrpc::error::{INTERNAL_ERROR, METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message::{self, Kind, Message};
use crate::parking::Question;
use crate::relay::call::Aside;
use crate::relay::gate::Failure;

/// From now on, what the server sends outside the host's calls (the session's stream) is
/// handled for the modern host instead of being copied to stdout.
pub fn divert_server_messages(path: &Arc<ToLegacy>) {
    let (tx, rx) = mpsc::channel(256);
    if path.ctx.gate.divert(tx) {
        tokio::spawn(serve_server_messages(path.clone(), rx));
    }
}

/// Severity order of the logging levels (RFC 5424).
fn severity(level: &str) -> Option<u8> {
    [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .position(|l| *l == level)
    .map(|p| p as u8)
}

/// A message on a request's stream that is not its answer.
pub fn on_the_way(
    host: &ModernHost,
    out: &crate::jsonrpc::writer::Outbox,
    message: &Message<'_>,
    payload: &[u8],
    log_level: Option<&str>,
    questions: Option<&mpsc::UnboundedSender<Question>>,
) -> Aside {
    let method = message.method.as_deref().unwrap_or_default();
    match message.kind {
        Kind::Notification => match method {
            "notifications/progress" => Aside::Host(one_line(payload).into_owned()),
            // Only for a request that asked for logs, at or above its level (§4.12).
            "notifications/message" => {
                let level = message
                    .params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .and_then(|p| p.get("level").and_then(Value::as_str).and_then(severity));
                match (log_level.and_then(severity), level) {
                    (Some(wanted), Some(level)) if level >= wanted => {
                        Aside::Host(one_line(payload).into_owned())
                    }
                    _ => Aside::Ignore,
                }
            }
            _ => {
                send_to_subscriptions(host, out, method, message.params);
                Aside::Ignore
            }
        },
        Kind::Request => {
            let raw_id = message.id.map(|id| id.get()).unwrap_or("null");
            if method == "ping" {
                return Aside::Upstream(Bytes::from(format!(
                    r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{{}}}}"#
                )));
            }
            if let Some(questions) = questions
                && matches!(
                    method,
                    "elicitation/create" | "sampling/createMessage" | "roots/list"
                )
            {
                let params = message
                    .params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or_else(|| json!({}));
                let _ = questions.send(Question::new(raw_id.to_owned(), method.to_owned(), params));
                return Aside::Ignore;
            }
            let why = format!(
                "the server asked the host for {method} during this call, but the host speaks protocol 2026-07-28, which has no server-to-client requests, and mcp-stdio cannot yet carry {method} to it as an input_required round"
            );
            let refusal = error_response(raw_id, METHOD_NOT_FOUND, &why, None);
            Aside::Fail(
                Failure {
                    code: INTERNAL_ERROR,
                    message: why,
                    data: None,
                },
                Some(Bytes::from(refusal)),
            )
        }
        Kind::Response => Aside::Ignore,
    }
}

/// Handles what the session's standalone stream carries for a modern host: notifications
/// go to matching subscriptions, the server's pings are answered, and its other requests
/// are refused (a modern host cannot be asked anything outside a call).
async fn serve_server_messages(path: Arc<ToLegacy>, mut inbound: mpsc::Receiver<Vec<u8>>) {
    let out = path.ctx.gate.outbox().clone();
    while let Some(payload) = inbound.recv().await {
        let Ok(message) = message::parse(&payload) else {
            continue;
        };
        let method = message.method.as_deref().unwrap_or_default();
        match message.kind {
            Kind::Notification => send_to_subscriptions(&path.host, &out, method, message.params),
            Kind::Request => {
                let raw_id = message.id.map(|id| id.get()).unwrap_or("null");
                // Servers built on SDKs that do not relate a request to its call send it
                // here; with exactly one call in progress, it can only be that call's.
                if matches!(
                    method,
                    "elicitation/create" | "sampling/createMessage" | "roots/list"
                ) {
                    let only = {
                        let flights = path.host.flights.lock().expect("flights lock");
                        (flights.len() == 1)
                            .then(|| flights.values().next().cloned())
                            .flatten()
                    };
                    if let Some(flight) = only {
                        let params = message
                            .params
                            .and_then(|p| serde_json::from_str(p.get()).ok())
                            .unwrap_or_else(|| json!({}));
                        let question = Question::new(raw_id.to_owned(), method.to_owned(), params);
                        if flight.send(question).is_ok() {
                            continue;
                        }
                    }
                }
                let answer = if method == "ping" {
                    format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{{}}}}"#).into_bytes()
                } else {
                    let why = format!(
                        "the host speaks protocol 2026-07-28 and can be asked {method} only within a call; this request came outside one (or while several calls were in progress, so its call is unknown)"
                    );
                    error_response(raw_id, METHOD_NOT_FOUND, &why, None)
                };
                path.ctx.link.deliver(Bytes::from(answer)).await;
            }
            Kind::Response => {}
        }
    }
}
