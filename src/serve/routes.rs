//! The HTTP side: routing, the guards and authentication in order, and the MCP endpoint's
//! POST (JSON or SSE answers), GET (the session stream) and DELETE.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::body::Body;
use bytes::Bytes;
use http::header::{
    ACCEPT, ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN,
    WWW_AUTHENTICATE,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::mpsc;

use super::Gateway;
use super::session::{Conflict, Event, Session, Undeliverable, request_progress_token};
use super::sessions::{Refused, short};
use crate::era::envelope;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, error_response};
use crate::jsonrpc::message::{self, IdKey, Kind};

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const PRM_PREFIX: &str = "/.well-known/oauth-protected-resource";

pub async fn handle(
    gateway: Arc<Gateway>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let config = &gateway.config;
    match (&method, path.as_str()) {
        (&Method::GET, "/healthz") => return text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => return ready(&gateway),
        _ => {}
    }
    if let Err(refused) = guards(&gateway, peer, request.headers()) {
        return *refused;
    }
    if method == Method::GET && path == "/metrics" {
        if let Err(refused) = authorize(&gateway, peer, request.headers()) {
            return *refused;
        }
        let body = gateway
            .metrics
            .render(gateway.sessions.count(), gateway.sessions.count());
        return Response::builder()
            .header(CONTENT_TYPE, "text/plain; version=0.0.4")
            .body(Body::from(body))
            .expect("a valid response");
    }
    if method == Method::GET && path.starts_with(PRM_PREFIX) && config.auth_token.is_some() {
        return protected_resource_metadata(&gateway, peer, request.headers());
    }
    if !path.eq_ignore_ascii_case(&config.path) {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    let started = Instant::now();
    let principal = match authorize(&gateway, peer, request.headers()) {
        Ok(principal) => principal,
        Err(refused) => {
            gateway
                .metrics
                .observe(method.as_str(), 401, started.elapsed());
            return *refused;
        }
    };
    let (label, response) = match method {
        Method::POST => post(&gateway, principal, request).await,
        Method::GET | Method::DELETE if config.modern_only => (
            method.to_string(),
            Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .header(ALLOW, "POST")
                .body(Body::empty())
                .expect("a valid response"),
        ),
        Method::GET => (
            "GET".to_owned(),
            stream(&gateway, principal, request.headers()),
        ),
        Method::DELETE => (
            "DELETE".to_owned(),
            delete(&gateway, principal, request.headers()),
        ),
        _ => (
            method.to_string(),
            Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .header(ALLOW, "GET, POST, DELETE")
                .body(Body::empty())
                .expect("a valid response"),
        ),
    };
    gateway
        .metrics
        .observe(&label, response.status().as_u16(), started.elapsed());
    response
}

/// A refusal: the response the request gets instead (boxed: it is large).
type Refusal = Box<Response<Body>>;

/// `Host` and `Origin`, before anything else is looked at.
fn guards(gateway: &Gateway, peer: SocketAddr, headers: &HeaderMap) -> Result<(), Refusal> {
    let guards = &gateway.config.guards;
    let forwarded_host = guards
        .trusts(peer.ip())
        .then(|| header(headers, "x-forwarded-host"))
        .flatten();
    let host = forwarded_host.or_else(|| header(headers, HOST.as_str()));
    if let Err(refusal) = guards.check_host(host) {
        tracing::info!(?refusal, "refused a request");
        return Err(Box::new(json_error(
            StatusCode::FORBIDDEN,
            "null",
            INVALID_REQUEST,
            "Forbidden: this Host is not allowed (DNS rebinding protection)",
        )));
    }
    let origins: Vec<&str> = headers
        .get_all(ORIGIN)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if let Err(refusal) = guards.check_origin(&origins) {
        tracing::info!(?refusal, "refused a request");
        return Err(Box::new(json_error(
            StatusCode::FORBIDDEN,
            "null",
            INVALID_REQUEST,
            "Forbidden: this Origin is not allowed (add it with --allow-origin)",
        )));
    }
    Ok(())
}

/// The static bearer, if one is set. The principal names who may use a session.
fn authorize(
    gateway: &Gateway,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<Option<String>, Refusal> {
    let Some(expected) = &gateway.config.auth_token else {
        return Ok(None);
    };
    let presented = header(headers, AUTHORIZATION.as_str()).and_then(|value| {
        let (scheme, token) = value.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    match presented {
        Some(token) if crate::oauth::pkce::matches(token, expected) => Ok(Some("bearer".into())),
        _ => {
            let metadata = format!(
                "{}{PRM_PREFIX}{}",
                public_base(gateway, peer, headers),
                gateway.config.path
            );
            let mut response = json_error(
                StatusCode::UNAUTHORIZED,
                "null",
                INVALID_REQUEST,
                "Unauthorized: send Authorization: Bearer <token>",
            );
            if let Ok(value) =
                HeaderValue::from_str(&format!(r#"Bearer resource_metadata="{metadata}""#))
            {
                response.headers_mut().insert(WWW_AUTHENTICATE, value);
            }
            Err(Box::new(response))
        }
    }
}

/// `scheme://host` as the client sees this server (a trusted proxy may say).
fn public_base(gateway: &Gateway, peer: SocketAddr, headers: &HeaderMap) -> String {
    let trusted = gateway.config.guards.trusts(peer.ip());
    let scheme = trusted
        .then(|| header(headers, "x-forwarded-proto"))
        .flatten()
        .filter(|p| *p == "https" || *p == "http")
        .unwrap_or("http");
    let host = trusted
        .then(|| header(headers, "x-forwarded-host"))
        .flatten()
        .or_else(|| header(headers, HOST.as_str()))
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

fn protected_resource_metadata(
    gateway: &Gateway,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Response<Body> {
    let base = public_base(gateway, peer, headers);
    let document = serde_json::json!({
        "resource": format!("{base}{}", gateway.config.path),
        "bearer_methods_supported": ["header"],
        "resource_name": "mcp-stdio serve",
    });
    Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(document.to_string()))
        .expect("a valid response")
}

fn ready(gateway: &Gateway) -> Response<Body> {
    if gateway.closing.is_cancelled() {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    if gateway.sessions.count() >= gateway.config.max_sessions {
        return text(StatusCode::SERVICE_UNAVAILABLE, "at --max-sessions\n");
    }
    text(StatusCode::OK, "ready\n")
}

async fn post(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    request: Request<Incoming>,
) -> (String, Response<Body>) {
    let max = gateway.config.max_message_size;
    let headers = request.headers().clone();
    let declared = header(&headers, CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return ("POST".into(), too_large(max));
    }
    // Chunked bodies are read like any other, up to the limit.
    let body = match http_body_util::Limited::new(request.into_body(), max)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return ("POST".into(), too_large(max));
        }
        Err(_) => {
            return (
                "POST".into(),
                text(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read\n",
                ),
            );
        }
    };
    let parsed = match message::parse(&body) {
        Ok(parsed) => parsed,
        Err(message::Invalid::NotJson(_)) => {
            return (
                "POST".into(),
                json_error(
                    StatusCode::BAD_REQUEST,
                    "null",
                    PARSE_ERROR,
                    "Parse error: the body is not JSON",
                ),
            );
        }
        Err(message::Invalid::NotMessage { reason, id }) => {
            let what = if message::is_batch(&body) {
                "Invalid Request: batches are not supported (send each message on its own POST)"
                    .to_owned()
            } else {
                format!("Invalid Request: {reason}")
            };
            return (
                "POST".into(),
                json_error(
                    StatusCode::BAD_REQUEST,
                    id.as_deref().unwrap_or("null"),
                    INVALID_REQUEST,
                    &what,
                ),
            );
        }
    };
    let method = parsed.method.as_deref().unwrap_or("response").to_owned();
    // Body first (§4.16): the envelope's version key means 2026-07-28, served statelessly
    // from the principal's pooled backend; everything else keeps the handshake era.
    if gateway.config.modern_clients && envelope::claims_modern(parsed.params) {
        let response = super::modern::post(gateway, principal, &headers, &body, &parsed).await;
        return (method, response);
    }
    if gateway.config.modern_clients
        && header(&headers, "mcp-protocol-version").is_some_and(crate::era::is_modern_version)
    {
        return (
            method,
            json_error(
                StatusCode::BAD_REQUEST,
                parsed.id.map_or("null", |i| i.get()),
                crate::jsonrpc::error::INVALID_PARAMS,
                "Invalid params: a 2026-07-28 request needs params._meta with io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
            ),
        );
    }
    if gateway.config.modern_only {
        return (
            method,
            modern_only_refusal(parsed.id.map_or("null", |i| i.get())),
        );
    }
    let session_header = header(&headers, SESSION_ID);
    if parsed.kind == Kind::Request && method == "initialize" {
        if session_header.is_some() {
            return (
                method,
                json_error(
                    StatusCode::BAD_REQUEST,
                    parsed.id.map_or("null", |i| i.get()),
                    INVALID_REQUEST,
                    "Bad Request: initialize starts a new session; send it without Mcp-Session-Id",
                ),
            );
        }
        if gateway.closing.is_cancelled() {
            return (
                method,
                text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
            );
        }
        let session = match gateway.sessions.create(gateway, principal, false) {
            Ok(session) => session,
            Err(Refused::Full(max)) => {
                return (
                    method,
                    json_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        parsed.id.map_or("null", |i| i.get()),
                        INTERNAL_ERROR,
                        &format!(
                            "Service Unavailable: --max-sessions ({max}) sessions are open; try again later"
                        ),
                    ),
                );
            }
            Err(Refused::Spawn(why)) => {
                tracing::error!("{why}");
                return (
                    method,
                    json_error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        parsed.id.map_or("null", |i| i.get()),
                        INTERNAL_ERROR,
                        "Internal error: the MCP server could not be started",
                    ),
                );
            }
        };
        let mut response = exchange(gateway, &session, &body, &parsed).await;
        if let Ok(value) = HeaderValue::from_str(&session.id) {
            response.headers_mut().insert(SESSION_ID, value);
        }
        return (method, response);
    }
    let Some(session_id) = session_header else {
        return (
            method,
            json_error(
                StatusCode::BAD_REQUEST,
                parsed.id.map_or("null", |i| i.get()),
                INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required (start a session with initialize)",
            ),
        );
    };
    let session = match gateway.sessions.get(session_id, principal.as_deref()) {
        Ok(session) => session,
        Err(_) => {
            return (
                method,
                json_error(
                    StatusCode::NOT_FOUND,
                    parsed.id.map_or("null", |i| i.get()),
                    INVALID_REQUEST,
                    "Session not found: it ended or never existed; start a new one with initialize",
                ),
            );
        }
    };
    session.touch();
    match parsed.kind {
        Kind::Request => {
            let response = exchange(gateway, &session, &body, &parsed).await;
            (method, response)
        }
        // Notifications and the client's answers to the server's requests.
        Kind::Notification | Kind::Response => {
            if let Err(undeliverable) = session
                .send_to_child(compact(&body), gateway.config.response_timeout)
                .await
            {
                return (
                    method,
                    undeliverable_response(gateway, "null", &undeliverable),
                );
            }
            (
                method,
                Response::builder()
                    .status(StatusCode::ACCEPTED)
                    .body(Body::empty())
                    .expect("a valid response"),
            )
        }
    }
}

/// The answer when a message could not be handed to the child: 404 if it is gone (the
/// session is over), 503 if it has stopped reading its input.
pub(super) fn undeliverable_response(
    gateway: &Gateway,
    raw_id: &str,
    undeliverable: &Undeliverable,
) -> Response<Body> {
    match undeliverable {
        Undeliverable::Gone => json_error(
            StatusCode::NOT_FOUND,
            raw_id,
            INVALID_REQUEST,
            "Session not found: its server process has exited",
        ),
        Undeliverable::Full => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            raw_id,
            INTERNAL_ERROR,
            &format!(
                "Service Unavailable: the MCP server has not read its input for {} s; --child-queue ({}) messages are waiting",
                gateway.config.response_timeout.as_secs_f64(),
                gateway.config.child_queue
            ),
        ),
    }
}

/// `--modern-only`: the handshake era is not served; the error names what is.
fn modern_only_refusal(id: &str) -> Response<Body> {
    json(
        StatusCode::BAD_REQUEST,
        Bytes::from(error_response(
            id,
            crate::era::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version: this server speaks 2026-07-28 only",
            Some(serde_json::json!({"supported": crate::era::MODERN_VERSIONS})),
        )),
    )
}

/// Sends one request to the session's child and answers with JSON (when the answer comes
/// first) or an SSE stream (when something for this request comes before it).
async fn exchange(
    gateway: &Arc<Gateway>,
    session: &Arc<Session>,
    body: &Bytes,
    parsed: &message::Message<'_>,
) -> Response<Body> {
    let raw_id = parsed.id.expect("requests have ids").get().to_owned();
    let id = IdKey::from_raw(parsed.id.expect("requests have ids")).expect("validated id");
    let (tx, mut rx) = mpsc::channel(64);
    let line = compact(body);
    match session.register(id.clone(), &line, request_progress_token(parsed.params), tx) {
        Ok(true) => {
            if let Err(undeliverable) = session
                .send_to_child(line, gateway.config.response_timeout)
                .await
            {
                session.forget(&id);
                return undeliverable_response(gateway, &raw_id, &undeliverable);
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
            session.forget(&id);
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
        Event::Answer(line) => json(StatusCode::OK, line),
        Event::Failed(why) => json_error(StatusCode::OK, &raw_id, INTERNAL_ERROR, &why),
        Event::Message(line) => {
            let keepalive = gateway.config.keepalive;
            let closing = gateway.closing.clone();
            let state = Streaming {
                first: Some(line),
                rx,
                done: false,
                raw_id,
                _busy: busy,
            };
            let stream = futures_util::stream::unfold(state, move |mut state| {
                let closing = closing.clone();
                async move {
                    if state.done {
                        return None;
                    }
                    if let Some(line) = state.first.take() {
                        return Some((
                            Ok::<_, std::convert::Infallible>(sse_event(None, &line)),
                            state,
                        ));
                    }
                    let chunk = tokio::select! {
                        event = state.rx.recv() => match event? {
                            Event::Message(line) => sse_event(None, &line),
                            Event::Answer(line) => {
                                state.done = true;
                                sse_event(None, &line)
                            }
                            Event::Failed(why) => {
                                state.done = true;
                                sse_event(None, &error_response(&state.raw_id, INTERNAL_ERROR, &why, None))
                            }
                        },
                        _ = tokio::time::sleep(keepalive) => Bytes::from_static(b": keepalive\n\n"),
                        _ = closing.cancelled() => return None,
                    };
                    Some((Ok(chunk), state))
                }
            });
            sse(Body::from_stream(stream))
        }
    }
}

/// A request's SSE stream in progress.
struct Streaming {
    first: Option<Bytes>,
    rx: mpsc::Receiver<Event>,
    done: bool,
    raw_id: String,
    _busy: Busy,
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
fn stream(
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
    let (generation, from) = session.open_stream(last);
    session.busy.fetch_add(1, Ordering::Relaxed);
    let busy = Busy(session.clone());
    let keepalive = gateway.config.keepalive;
    let closing = gateway.closing.clone();
    tracing::debug!(session = %short(&session.id), from, "GET stream opened");
    let stream = futures_util::stream::unfold((from, busy), move |(cursor, busy)| {
        let closing = closing.clone();
        async move {
            let session = busy.0.clone();
            loop {
                let notified = session.outbound_changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let events = session.events_from(generation, cursor)?;
                if !events.is_empty() {
                    let mut chunk = Vec::new();
                    let mut next = cursor;
                    for (id, line) in events {
                        chunk.extend_from_slice(&sse_event(Some(id), &line));
                        next = id + 1;
                    }
                    return Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(chunk)),
                        (next, busy),
                    ));
                }
                if session.ended.is_cancelled() || closing.is_cancelled() {
                    return None;
                }
                tokio::select! {
                    _ = &mut notified => continue,
                    _ = tokio::time::sleep(keepalive) => {
                        session.touch();
                        return Some((Ok(Bytes::from_static(b": keepalive\n\n")), (cursor, busy)));
                    }
                    _ = session.ended.cancelled() => return None,
                    _ = closing.cancelled() => return None,
                }
            }
        }
    });
    sse(Body::from_stream(stream))
}

fn delete(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    headers: &HeaderMap,
) -> Response<Body> {
    match session_of(gateway, principal, headers) {
        Ok(session) => {
            gateway.sessions.end(&session);
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::empty())
                .expect("a valid response")
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

pub(super) fn sse_event(id: Option<u64>, line: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(line.len() + 32);
    event.extend_from_slice(b"event: message\n");
    if let Some(id) = id {
        event.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(line);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

pub(super) fn sse(body: Body) -> Response<Body> {
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(body)
        .expect("a valid response")
}

pub(super) fn json(status: StatusCode, line: Bytes) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(line))
        .expect("a valid response")
}

pub(super) fn json_error(status: StatusCode, id: &str, code: i64, message: &str) -> Response<Body> {
    json(status, Bytes::from(error_response(id, code, message, None)))
}

pub(super) fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "text/plain")
        .body(Body::from(body))
        .expect("a valid response")
}

fn too_large(max: usize) -> Response<Body> {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "null",
        INVALID_REQUEST,
        &format!("Payload Too Large: the body exceeds --max-message-size ({max} bytes)"),
    )
}

pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A message as one line for the child's stdin.
pub(super) fn compact(body: &Bytes) -> Bytes {
    match crate::jsonrpc::framing::one_line(body) {
        std::borrow::Cow::Borrowed(_) => body.clone(),
        std::borrow::Cow::Owned(line) => Bytes::from(line),
    }
}
