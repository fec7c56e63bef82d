//! The handshake-era session endpoint: `initialize` starts a session (a child of its own),
//! its POSTs are answered with JSON or, when something comes first, an SSE stream; GET is
//! the session's numbered, resumable stream; DELETE ends it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use http::header::ACCEPT;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use tokio::sync::mpsc;

use super::audited::{MemberLookup, RefusedBy};
use super::backend::{Conflict, Event, request_progress_token};
use super::gateway::{Asked, Gateway};
use super::policing::Verdict;
use super::responses::{compact, empty, header, json, json_error, sse_body, sse_event, text};
use super::session::Session;
use super::sessions::{Refused, short};
use super::trace_meta::trace_from;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST, error_response};
use crate::jsonrpc::message::{self, IdKey, Kind};
use crate::policy::{Client, Principal};
use crate::trace_context::TraceContext;
use crate::trace_context::with_trace;

pub const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";

/// A refusal: the response the request gets instead (boxed: it is large).
type Refusal = Box<Response<Body>>;

/// A handshake-era POST: `initialize` starts a session, anything else needs one.
pub async fn post(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    identity: Arc<Principal>,
    headers: &HeaderMap,
    body: &Bytes,
    parsed: &message::Message<'_>,
) -> Response<Body> {
    let method = parsed.method.as_deref().unwrap_or("response");
    // The id a refusal answers to (`null` for a notification or the client's answer).
    let raw_id = parsed.id.map_or("null", |i| i.get());
    let session_header = header(headers, SESSION_ID);
    if parsed.kind == Kind::Request && method == "initialize" {
        if session_header.is_some() {
            return json_error(
                StatusCode::BAD_REQUEST,
                raw_id,
                INVALID_REQUEST,
                "Bad Request: initialize starts a new session; send it without Mcp-Session-Id",
            );
        }
        let trace = trace_from(headers, parsed);
        return initialize(gateway, principal, &identity, body, parsed, trace.as_ref()).await;
    }
    let Some(session_id) = session_header else {
        return json_error(
            StatusCode::BAD_REQUEST,
            raw_id,
            INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required (start a session with initialize)",
        );
    };
    let session = match gateway.sessions.get(session_id, principal.as_deref()) {
        Ok(session) => session,
        Err(_) => {
            return json_error(
                StatusCode::NOT_FOUND,
                raw_id,
                INVALID_REQUEST,
                "Session not found: it ended or never existed; start a new one with initialize",
            );
        }
    };
    session.touch();
    if session.protocol_version.get().is_none()
        && let Some(version) = header(headers, "mcp-protocol-version")
    {
        let _ = session.protocol_version.set(version.to_owned());
    }
    match parsed.kind {
        Kind::Request => {
            let trace = trace_from(headers, parsed);
            let mut response =
                exchange(gateway, &session, &identity, body, parsed, trace.as_ref()).await;
            if let Some(member) = MemberLookup::from_raw(gateway, &session, method, parsed.params) {
                member.mark(method, &mut response);
            }
            response
        }
        // A call made as a notification would run unjudged: not passed on.
        Kind::Notification if gateway.config.policing.is_some() && governed(method) => {
            tracing::info!(
                method,
                "dropped a notification named like a request the policy judges"
            );
            empty(StatusCode::ACCEPTED)
        }
        // Notifications and the client's answers to the server's requests.
        Kind::Notification | Kind::Response => {
            if let Err(undeliverable) = session
                .backend
                .send(compact(body), gateway.config.response_timeout)
                .await
            {
                return gateway.undeliverable("null", &undeliverable);
            }
            empty(StatusCode::ACCEPTED)
        }
    }
}

/// `initialize`: a new session (unless serve is closing or draining, or a bound is
/// reached), its child given the request, and the session's id on the answer.
async fn initialize(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    identity: &Arc<Principal>,
    body: &Bytes,
    parsed: &message::Message<'_>,
    trace: Option<&TraceContext>,
) -> Response<Body> {
    let raw_id = parsed.id.map_or("null", |i| i.get());
    if gateway.closing.is_cancelled() {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    if gateway.draining.is_cancelled() {
        // Nothing was started: safe for a load balancer to retry on another replica.
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            raw_id,
            INTERNAL_ERROR,
            "Service Unavailable: this replica is shutting down and takes no new sessions; retry (another replica will take it)",
        );
    }
    let session = match gateway.open_session(principal, false) {
        Ok(session) => session,
        Err(Refused::Full(max)) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Service Unavailable: --max-sessions ({max}) sessions are open; try again later"
                ),
            );
        }
        Err(Refused::PrincipalFull(max)) => {
            return json_error(
                StatusCode::TOO_MANY_REQUESTS,
                raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Too Many Requests: you hold --max-sessions-per-principal ({max}) sessions; end one (DELETE) or let one idle out"
                ),
            );
        }
        Err(Refused::Spawn(why)) => {
            tracing::error!("{why}");
            return json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                raw_id,
                INTERNAL_ERROR,
                "Internal error: the MCP server could not be started",
            );
        }
    };
    let _ = session.client.set(client_of(parsed.params));
    let mut response = exchange(gateway, &session, identity, body, parsed, trace).await;
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_ID, value);
    }
    response
}

/// Sends one request to the session's child and answers with JSON (when the answer comes
/// first) or an SSE stream (when something for this request comes before it).
async fn exchange(
    gateway: &Arc<Gateway>,
    session: &Arc<Session>,
    identity: &Arc<Principal>,
    body: &Bytes,
    parsed: &message::Message<'_>,
    trace: Option<&TraceContext>,
) -> Response<Body> {
    let raw_id = parsed.id.expect("requests have ids").get().to_owned();
    let id = IdKey::from_raw(parsed.id.expect("requests have ids")).expect("validated id");
    let filter = match police(gateway, session, identity, parsed, &raw_id).await {
        Verdict::Pass => None,
        Verdict::Filter(filter) => Some(Arc::new(filter)),
        Verdict::Answer { line, rule } => {
            let mut answer = json(StatusCode::OK, Bytes::from(line));
            answer.extensions_mut().insert(RefusedBy(rule));
            return answer;
        }
    };
    let seen = move |line: Bytes| match &filter {
        Some(filter) => Bytes::from(filter.apply(&line)),
        None => line,
    };
    let (tx, mut rx) = mpsc::channel(64);
    let line = match trace {
        Some(trace) => with_trace(body, parsed.params, trace)
            .map(|spliced| compact(&spliced))
            .unwrap_or_else(|| compact(body)),
        None => compact(body),
    };
    let progress = request_progress_token(parsed.params);
    match session.backend.register(id.clone(), &line, progress, tx) {
        Ok(true) => {
            if let Err(undeliverable) = session
                .backend
                .send(line, gateway.config.response_timeout)
                .await
            {
                session.backend.forget(&id);
                return gateway.undeliverable(&raw_id, &undeliverable);
            }
        }
        Ok(false) => {} // the same request is already running: wait for its answer
        Err(Conflict::DifferentRequest) => {
            return json_error(
                StatusCode::CONFLICT,
                &raw_id,
                INVALID_REQUEST,
                &format!(
                    "Conflict: request id {raw_id} is already in flight with a different request"
                ),
            );
        }
        Err(Conflict::Full) => {
            return json_error(
                StatusCode::TOO_MANY_REQUESTS,
                &raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Too Many Requests: --max-requests-per-session ({}) requests are in flight on this session",
                    gateway.config.max_requests_per_session
                ),
            );
        }
    }
    session.busy.fetch_add(1, Ordering::Relaxed);
    let busy = Busy(session.clone());
    let timeout = gateway.config.response_timeout;
    let first = match tokio::time::timeout(timeout, rx.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => Event::Failed("the session ended".into()),
        Err(_) => {
            session.backend.forget(&id);
            return json_error(
                StatusCode::GATEWAY_TIMEOUT,
                &raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Gateway Timeout: the MCP server did not answer within {} s (--timeout-response)",
                    timeout.as_secs_f64()
                ),
            );
        }
    };
    match first {
        Event::Answer(line) => json(StatusCode::OK, seen(line)),
        Event::Failed(why) => json_error(StatusCode::OK, &raw_id, INTERNAL_ERROR, &why),
        Event::Message(line) => {
            // Something for this request came before its answer: stream from here on.
            let rest = rest_of_stream(rx, raw_id, busy, seen);
            let first = futures_util::stream::once(async move { sse_event(None, &line) });
            sse_body(first.chain(rest), gateway.sse_timing(), || {}, None)
        }
    }
}

/// A streamed request's events after the first, ending with its answer (as `seen` makes
/// it) or its failure.
fn rest_of_stream(
    rx: mpsc::Receiver<Event>,
    raw_id: String,
    busy: Busy,
    seen: impl Fn(Bytes) -> Bytes + Clone + Send + 'static,
) -> impl futures_util::Stream<Item = Bytes> + Send {
    futures_util::stream::unfold(
        (rx, raw_id, busy, false),
        move |(mut rx, raw_id, busy, done)| {
            let seen = seen.clone();
            async move {
                if done {
                    return None;
                }
                let (chunk, done) = match rx.recv().await? {
                    Event::Message(line) => (sse_event(None, &line), false),
                    Event::Answer(line) => (sse_event(None, &seen(line)), true),
                    Event::Failed(why) => (
                        sse_event(None, &error_response(&raw_id, INTERNAL_ERROR, &why, None)),
                        true,
                    ),
                };
                Some((chunk, (rx, raw_id, busy, done)))
            }
        },
    )
}

/// Marks a session busy while a request or stream is open on it (the idle reaper waits).
struct Busy(Arc<Session>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// The session's GET stream: events numbered per session, resumable with
/// `Last-Event-ID` from the replay buffer, `: keepalive` comments in between.
pub fn stream(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    headers: &HeaderMap,
) -> Response<Body> {
    let session = match session_of(gateway, principal, headers) {
        Ok(session) => session,
        Err(refused) => return *refused,
    };
    let accepts_sse = header(headers, ACCEPT.as_str())
        .is_none_or(|a| a.contains("text/event-stream") || a.contains("*/*"));
    if !accepts_sse {
        return text(
            StatusCode::NOT_ACCEPTABLE,
            "the GET stream is text/event-stream\n",
        );
    }
    let last = header(headers, LAST_EVENT_ID).and_then(|v| v.trim().parse::<u64>().ok());
    let (generation, from) = session.events.open_stream(last);
    session.busy.fetch_add(1, Ordering::Relaxed);
    let busy = Busy(session.clone());
    let closing = gateway.closing.clone();
    tracing::debug!(session = %short(&session.id), from, "GET stream opened");
    let source = futures_util::stream::unfold((from, busy), move |(cursor, busy)| {
        let closing = closing.clone();
        async move {
            let session = busy.0.clone();
            loop {
                let notified = session.events.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let events = session.events.events_from(generation, cursor)?;
                if !events.is_empty() {
                    let mut chunk = Vec::new();
                    let mut next = cursor;
                    for (id, line) in events {
                        chunk.extend_from_slice(&sse_event(Some(id), &line));
                        next = id + 1;
                    }
                    return Some((Bytes::from(chunk), (next, busy)));
                }
                if session.ended.is_cancelled() || closing.is_cancelled() {
                    return None;
                }
                tokio::select! {
                    _ = &mut notified => continue,
                    _ = session.ended.cancelled() => return None,
                    _ = closing.cancelled() => return None,
                }
            }
        }
    });
    // A quiet stream still counts as use: the idle reaper leaves its session alone.
    let touched = session.clone();
    sse_body(source, gateway.sse_timing(), move || touched.touch(), None)
}

pub fn delete(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    headers: &HeaderMap,
) -> Response<Body> {
    match session_of(gateway, principal, headers) {
        Ok(session) => {
            gateway.sessions.end(&session);
            empty(StatusCode::OK)
        }
        Err(refused) => *refused,
    }
}

/// The session a GET or DELETE names: 400 without `Mcp-Session-Id`, 404 for one that is
/// unknown, ended, or someone else's.
fn session_of(
    gateway: &Gateway,
    principal: Option<String>,
    headers: &HeaderMap,
) -> Result<Arc<Session>, Refusal> {
    let Some(session_id) = header(headers, SESSION_ID) else {
        return Err(Box::new(json_error(
            StatusCode::BAD_REQUEST,
            "null",
            INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        )));
    };
    gateway
        .sessions
        .get(session_id, principal.as_deref())
        .map_err(|_| {
            Box::new(json_error(
                StatusCode::NOT_FOUND,
                "null",
                INVALID_REQUEST,
                "Session not found",
            ))
        })
}

/// The answer to params the policy cannot judge as the server would read them.
fn unreadable(raw_id: &str) -> Verdict {
    let line = error_response(
        raw_id,
        crate::jsonrpc::error::INVALID_PARAMS,
        "Invalid params: the gateway's policy cannot read them (nested too deeply, a number out of range, or serde_json's private RawValue key)",
        None,
    );
    Verdict::Answer {
        line,
        rule: "default".into(),
    }
}

/// The policy's verdict on a session's request (its params read only when a policy is
/// in force).
async fn police(
    gateway: &Gateway,
    session: &Arc<Session>,
    identity: &Arc<Principal>,
    parsed: &message::Message<'_>,
    raw_id: &str,
) -> Verdict {
    if gateway.config.policing.is_none() {
        return Verdict::Pass;
    }
    let params: Option<serde_json::Value> = match parsed.params {
        // serde_json reads an object keyed by its private RawValue token as other JSON than
        // the bytes the server gets: judged as unreadable (WORKAROUNDS.md).
        Some(raw) if crate::jsonrpc::raw_value_token::names_raw_value_token(raw.get()) => {
            return unreadable(raw_id);
        }
        Some(raw) => match serde_json::from_str(raw.get()) {
            Ok(params) => Some(params),
            // What the policy cannot read must not reach the server unjudged (a number out
            // of range, nesting past serde's limit: a server's parser may take them).
            Err(_) => return unreadable(raw_id),
        },
        None => None,
    };
    // A session whose initialize named no client still speaks the handshake era.
    static UNNAMED: std::sync::LazyLock<Client> = std::sync::LazyLock::new(|| Client {
        era: "handshake".into(),
        ..Client::default()
    });
    let client = session.client.get().unwrap_or(&UNNAMED);
    let asked = Asked {
        session,
        identity,
        client,
        method: parsed.method.as_deref().unwrap_or_default(),
        raw_id,
        params: params.as_ref(),
        modern_child: false,
    };
    gateway.police(asked).await
}

/// The client application an `initialize` names.
fn client_of(params: Option<&serde_json::value::RawValue>) -> Client {
    let info: Option<serde_json::Value> = params
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
        .and_then(|p| p.get("clientInfo").cloned());
    let text = |key: &str| {
        info.as_ref()
            .and_then(|i| i.get(key))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Client {
        name: text("name"),
        version: text("version"),
        era: "handshake".into(),
    }
}

/// Whether `method` is one the policy judges (a request by that name must not arrive as a
/// notification).
fn governed(method: &str) -> bool {
    method.contains('/') && !method.starts_with("notifications/")
}
