//! The audit line of one request at an endpoint, whatever era or backend answers it: its
//! facts taken when it arrives (who, which client, what, a digest of the arguments, the
//! trace it belongs to) with its place in the audit queue, and its outcome read off what
//! the client is sent: a JSON answer when it is written, a stream's answer when it passes,
//! or `cancelled` when the stream is dropped before it.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::gateway::Gateway;
use super::responses::{header, json_error};
use crate::audit::{Auditor, Outcome, Pending, Record};
use crate::jsonrpc::error::INTERNAL_ERROR;
use crate::jsonrpc::message::{Kind, Message};
use crate::trace_context::TraceContext;

/// What a policy refusal tells the audit line (a response extension).
#[derive(Debug, Clone)]
pub struct RefusedBy(pub String);

/// The member server an aggregate endpoint sent a request to (a response extension).
#[derive(Debug, Clone)]
pub struct Member(pub String);

/// What an audit line needs to name the member server a request went to, taken before
/// the request is sent: only with an audit log, at an aggregate endpoint (elsewhere the
/// params are not read again for it).
pub struct MemberLookup {
    session: Arc<super::session::Session>,
    item: String,
}

impl MemberLookup {
    pub fn new(
        gateway: &Gateway,
        session: &Arc<super::session::Session>,
        method: &str,
        params: &serde_json::Map<String, Value>,
    ) -> Option<MemberLookup> {
        if gateway.config.auditor.is_none() || !session.backend.stands_for_several() {
            return None;
        }
        let item = super::policing::item_of(method, params)?.to_owned();
        Some(MemberLookup {
            session: session.clone(),
            item,
        })
    }

    /// The same from a request's raw params.
    pub fn from_raw(
        gateway: &Gateway,
        session: &Arc<super::session::Session>,
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Option<MemberLookup> {
        if gateway.config.auditor.is_none() || !session.backend.stands_for_several() {
            return None;
        }
        let params: serde_json::Map<String, Value> = serde_json::from_str(params?.get()).ok()?;
        MemberLookup::new(gateway, session, method, &params)
    }

    /// Marks `response` with the member server (a lookup in the aggregate's catalog, which
    /// the request's routing has read by now).
    pub fn mark(self, method: &str, response: &mut Response<Body>) {
        if let Some(server) = super::policing::member_of(&self.session, method, &self.item) {
            response.extensions_mut().insert(Member(server));
        }
    }
}

/// A request being audited or traced (or both): its record, and its span's context.
pub struct Audited(Pending, Option<opentelemetry::Context>);

/// Runs `endpoint` for a request with its audit line around it (with no audit log, just
/// runs it); a full queue under `--audit-when-full refuse` answers instead.
pub async fn around(
    gateway: &Gateway,
    principal: Option<&str>,
    headers: &HeaderMap,
    parsed: &Message<'_>,
    endpoint: impl Future<Output = Response<Body>>,
) -> Response<Body> {
    match begin(gateway, principal, headers, parsed).await {
        Ok(Some(audited)) => match audited.1.clone() {
            // Inside the span, so what goes on to the server carries it.
            Some(context) => {
                let endpoint = opentelemetry::context::FutureExt::with_context(endpoint, context);
                audited.finish(endpoint.await).await
            }
            None => audited.finish(endpoint.await).await,
        },
        Ok(None) => endpoint.await,
        Err(refused) => refused,
    }
}

/// Starts the line of a request (none for a notification or a client's answer, or with no
/// audit log). `Err`: the queue is full and `--audit-when-full refuse` says to refuse.
async fn begin(
    gateway: &Gateway,
    principal: Option<&str>,
    headers: &HeaderMap,
    parsed: &Message<'_>,
) -> Result<Option<Audited>, Response<Body>> {
    let auditor = gateway.config.auditor.as_ref();
    if (auditor.is_none() && crate::telemetry::installed().is_none())
        || parsed.kind != Kind::Request
    {
        return Ok(None);
    }
    let raw_id = parsed.id.map_or("null", |i| i.get());
    if let Some(auditor) = auditor {
        auditor.admit(true).await.map_err(|_| {
            json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                raw_id,
                INTERNAL_ERROR,
                "Service Unavailable: the audit log cannot keep up, so nothing unaudited runs; try again shortly",
            )
        })?;
    }
    let params: Value = parsed
        .params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or(Value::Null);
    let method = parsed.method.as_deref().unwrap_or_default();
    let session = header(headers, "mcp-session-id").map(str::to_owned);
    // Only the audit line names the client application.
    let client = auditor.and_then(|_| client(gateway, principal, session.as_deref(), &params));
    // `_meta.traceparent` (SEP-414) wins over the header, as Envoy reads them.
    let parent = TraceContext::from_meta(&params)
        .or_else(|| TraceContext::from_headers(|name| header(headers, name)));
    let with_values = auditor.is_some_and(|a| a.settings.arguments);
    let mut record = Record::of_request(method, raw_id, params, with_values);
    record.principal = principal.map(str::to_owned);
    record.client = client;
    record.server = gateway.config.command.server.clone();
    // Short, as the log names sessions: a whole id is a credential on an open endpoint.
    record.session = session.map(|id| super::sessions::short(&id));
    let protocol = header(headers, "mcp-protocol-version");
    let operation = crate::telemetry::Operation::start(&record, parent.as_ref(), protocol);
    // The line names the trace this request is in: ours when a span was made.
    record.trace_id = match &operation {
        Some(operation) => operation.trace_id(),
        None => parent.as_ref().map(|t| t.trace_id().to_owned()),
    };
    // A trace started here: the request's log lines name it from now on.
    if parent.is_none()
        && let Some(id) = &record.trace_id
    {
        tracing::Span::current().record("trace_id", tracing::field::display(id));
    }
    let pending = match auditor {
        Some(auditor) => auditor.pending(record),
        None => Pending::unlogged(record),
    };
    Ok(Some(match operation {
        Some(operation) => {
            let context = operation.context();
            Audited(pending.observed_by(Box::new(operation)), Some(context))
        }
        None => Audited(pending, None),
    }))
}

impl Audited {
    fn record(&mut self) -> &mut Record {
        &mut self.0.record
    }

    /// The response the client gets, its outcome read as it goes out.
    pub async fn finish(mut self, response: Response<Body>) -> Response<Body> {
        if let Some(Member(server)) = response.extensions().get::<Member>() {
            self.record().backend = Some(server.clone());
        }
        if let Some(RefusedBy(rule)) = response.extensions().get::<RefusedBy>() {
            self.record().outcome = Outcome::Refused;
            self.record().rule = Some(rule.clone());
        }
        if self.record().session.is_none() {
            self.record().session =
                header(response.headers(), "mcp-session-id").map(super::sessions::short);
        }
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if streamed {
            return self.watch(response);
        }
        let (parts, body) = response.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        self.classify(parts.status, &bytes);
        self.0.finish();
        Response::from_parts(parts, Body::from(bytes))
    }

    /// The outcome of an answer (or an HTTP refusal) the client was sent.
    fn classify(&mut self, status: StatusCode, body: &[u8]) {
        let record = self.record();
        record.answered(body);
        if record.outcome == Outcome::Refused {
            return;
        }
        if status == StatusCode::GATEWAY_TIMEOUT {
            record.outcome = Outcome::Timeout;
        } else if !status.is_success() {
            record.outcome = Outcome::ProtocolError;
            record.error_code.get_or_insert(i64::from(status.as_u16()));
        }
    }

    /// A streamed response: its answer is the event that carries a result or an error.
    fn watch(self, response: Response<Body>) -> Response<Body> {
        let (parts, body) = response.into_parts();
        let mut watching = Watching(Some(self));
        let stream = body.into_data_stream().map(move |chunk| {
            if let Ok(bytes) = &chunk {
                watching.saw(bytes);
            }
            chunk
        });
        Response::from_parts(parts, Body::from_stream(stream))
    }
}

/// A stream's line until its answer passes; dropped before that, the client went away.
struct Watching(Option<Audited>);

impl Watching {
    fn saw(&mut self, chunk: &Bytes) {
        let Some(audited) = self.0.as_mut() else {
            return;
        };
        let text = String::from_utf8_lossy(chunk);
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let Ok(message) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let answer = message.get("method").is_none()
                && (message.get("result").is_some() || message.get("error").is_some());
            if answer {
                audited.classify(StatusCode::OK, data.as_bytes());
                if let Some(audited) = self.0.take() {
                    audited.0.finish();
                }
                return;
            }
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        if let Some(mut audited) = self.0.take() {
            if audited.record().outcome != Outcome::Refused {
                audited.record().outcome = Outcome::Cancelled;
            }
            audited.0.finish();
        }
    }
}

/// The client application: an `initialize`'s `clientInfo`, a 2026-07-28 request's
/// envelope, or the session's.
fn client(
    gateway: &Gateway,
    principal: Option<&str>,
    session: Option<&str>,
    params: &Value,
) -> Option<String> {
    let info = params
        .get("clientInfo")
        .or_else(|| params.pointer("/_meta/io.modelcontextprotocol~1clientInfo"));
    if let Some(info) = info {
        let text = |key| info.get(key).and_then(Value::as_str).unwrap_or_default();
        return Some(format!("{}/{}", text("name"), text("version")));
    }
    let session = gateway.sessions.get(session?, principal).ok()?;
    let client = session.client.get()?;
    Some(format!("{}/{}", client.name, client.version))
}

/// The auditor, if any, for the `/metrics` lines.
pub fn metrics(auditor: Option<&Arc<Auditor>>) -> String {
    auditor.map(|a| a.metrics()).unwrap_or_default()
}
