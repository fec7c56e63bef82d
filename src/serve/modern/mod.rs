//! 2026-07-28 requests: the validation ladder, then the principal's pooled backend. Each
//! request goes to the child under a gateway id (`gw-N`) with its progress token remapped
//! (and, for a handshake-era child, the envelope stripped), and comes back under the
//! client's id with `resultType`, cache hints and modern error codes. A handshake-era
//! child's questions during a call become `input_required` rounds (the call stays parked
//! until the retry). Closing the response stream cancels the call in the child.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::Gateway;
use super::http::{SseTiming, json, json_error, sse_body, sse_event, undeliverable_response};
use super::ladder;
use super::pool::{Backend, Unavailable};
use super::session::{Conflict, Event, Session, Undeliverable};
use super::sessions::Refused;
use crate::era::bridge::{answer_for_modern, discover_result, modern_answer_for_modern};
use crate::era::{
    META_CLIENT_CAPABILITIES, META_SUBSCRIPTION_ID, MISSING_CLIENT_CAPABILITY, envelope, mrtr,
};
use crate::jsonrpc::error::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, error_response,
};
use crate::jsonrpc::message::{IdKey, Kind, Message, parse};
use crate::parking::{Asked, Question, Resumed, Retry};

pub async fn post(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    headers: &HeaderMap,
    _body: &Bytes,
    parsed: &Message<'_>,
) -> Response<Body> {
    let raw_id = parsed.id.map_or("null", |i| i.get()).to_owned();
    let method = parsed.method.as_deref().unwrap_or_default();
    // A routing header that appears twice is ambiguous: as bad as a missing one.
    let lookup = |name: &str| {
        let mut values = headers.get_all(name).iter();
        let first = values.next()?.to_str().ok()?.to_owned();
        values.next().is_none().then_some(first)
    };
    let claim = match ladder::check(method, parsed.params, lookup) {
        Ok(claim) => claim,
        Err(rejection) => {
            let line = error_response(&raw_id, rejection.code, &rejection.message, rejection.data);
            return json(
                StatusCode::from_u16(rejection.status).unwrap_or(StatusCode::BAD_REQUEST),
                Bytes::from(line),
            );
        }
    };
    if parsed.kind != Kind::Request {
        // A stateless server cannot honour a posted cancel by a client-chosen id without
        // letting one caller cancel another's work: accepted and dropped.
        return Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Body::empty())
            .expect("a valid response");
    }
    let backend = match gateway.pool.backend(gateway, principal.clone()).await {
        Ok(backend) => backend,
        Err(Unavailable::Refused(Refused::Full(max))) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Service Unavailable: --max-sessions ({max}) children are running; try again later"
                ),
            );
        }
        Err(Unavailable::Refused(Refused::Spawn(why)) | Unavailable::Handshake(why)) => {
            tracing::error!("{why}");
            return json_error(
                StatusCode::BAD_GATEWAY,
                &raw_id,
                INTERNAL_ERROR,
                "the MCP server could not be started",
            );
        }
    };
    if method == "server/discover" && !backend.modern {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{}}}"#,
            discover_result(&backend.initialize)
        );
        return json(StatusCode::OK, Bytes::from(line));
    }
    let mut params = envelope::params_object(parsed.params).unwrap_or_default();
    if method == "tools/call"
        && let Err(mismatch) = super::params::check(gateway, &backend, &params, lookup).await
    {
        tracing::debug!("{mismatch}");
        return json_error(
            StatusCode::BAD_REQUEST,
            &raw_id,
            crate::era::HEADER_MISMATCH,
            &mismatch,
        );
    }
    if method == "subscriptions/listen" && !backend.modern {
        return super::listen::serve(gateway, &backend, &raw_id, &params).await;
    }
    let request = Request {
        raw_id,
        method: method.to_owned(),
        name: name_of(method, &params),
        logs: claim.log_level.is_some(),
        capabilities: params
            .get("_meta")
            .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or_default(),
        token: params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .cloned(),
        principal,
    };
    if !backend.modern && mrtr::may_require_input(method) {
        if let Some(state) = params.get("requestState") {
            return resume(gateway, backend, request, &params, state).await;
        }
        // Answers to questions nobody asked: a handshake-era child would not know them.
        params.remove("inputResponses");
    }
    if !backend.modern {
        envelope::strip(&mut params);
    }
    match send(gateway, &backend, method, params).await {
        Ok(flight) => respond(gateway, backend, request, flight).await,
        Err(refusal) => refusal.response(gateway, &request.raw_id),
    }
}

/// The tool, prompt or resource a request is about: a `requestState` is bound to it.
fn name_of(method: &str, params: &Map<String, Value>) -> Option<String> {
    let field = if method == "resources/read" {
        "uri"
    } else {
        "name"
    };
    params.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// What the client asked, as far as the answer depends on it.
struct Request {
    raw_id: String,
    method: String,
    name: Option<String>,
    /// The request asked for log lines (`logLevel`).
    logs: bool,
    /// The client capabilities declared in this request.
    capabilities: Value,
    /// The client's progress token, put back on the child's progress notifications.
    token: Option<Value>,
    principal: Option<String>,
}

/// A call in the child: its events, and the guard that cancels it if nobody answers.
pub struct Flight {
    guard: InFlight,
    rx: mpsc::Receiver<Event>,
}

/// Why a call could not be sent.
enum SendRefused {
    Full(usize),
    Conflict,
    Undeliverable(Undeliverable),
}

impl SendRefused {
    fn response(&self, gateway: &Gateway, raw_id: &str) -> Response<Body> {
        match self {
            SendRefused::Full(max) => json_error(
                StatusCode::TOO_MANY_REQUESTS,
                raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Too Many Requests: --max-requests-per-session ({max}) requests are in flight on this backend"
                ),
            ),
            SendRefused::Conflict => json_error(
                StatusCode::CONFLICT,
                raw_id,
                INVALID_REQUEST,
                "Conflict: gateway id reused",
            ),
            // No session to be "not found": the pool replaces the child on the next request.
            SendRefused::Undeliverable(Undeliverable::Gone) => json_error(
                StatusCode::BAD_GATEWAY,
                raw_id,
                INTERNAL_ERROR,
                "the MCP server process has exited; try again",
            ),
            SendRefused::Undeliverable(full) => undeliverable_response(gateway, raw_id, full),
        }
    }
}

/// Sends a request to the child under a fresh gateway id, its progress token remapped.
async fn send(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    method: &str,
    mut params: Map<String, Value>,
) -> Result<Flight, SendRefused> {
    let upstream_id = gateway.pool.next_id();
    // The client's progress token is the client's: the child sees the gateway's id as the
    // token, and notifications go back with the original.
    let remapped = params
        .get_mut("_meta")
        .and_then(Value::as_object_mut)
        .and_then(|meta| {
            meta.get_mut("progressToken")
                .map(|token| *token = upstream_id.clone().into())
        })
        .is_some();
    let line = Bytes::from(envelope::request_line(
        &serde_json::to_string(&upstream_id).expect("a string"),
        method,
        &params,
    ));
    let session = backend.session.clone();
    let key = IdKey::Str(upstream_id.clone());
    let (tx, rx) = mpsc::channel(64);
    let token = remapped.then(|| format!("s:{upstream_id}"));
    match session.register(key.clone(), &line, token, tx) {
        Ok(_) => {}
        Err(Conflict::Full) => {
            return Err(SendRefused::Full(gateway.config.max_requests_per_session));
        }
        Err(Conflict::DifferentRequest) => return Err(SendRefused::Conflict),
    }
    session.busy.fetch_add(1, Ordering::Relaxed);
    let mut guard = InFlight {
        session: session.clone(),
        key,
        upstream_id,
        answered: false,
    };
    if let Err(undeliverable) = session
        .send_to_child(line, gateway.config.response_timeout)
        .await
    {
        guard.answered = true;
        session.forget(&guard.key);
        return Err(SendRefused::Undeliverable(undeliverable));
    }
    Ok(Flight { guard, rx })
}

/// Answers the client from a call in the child: plain JSON when the first thing that comes
/// is the answer, else an SSE stream of its notifications that ends with the answer.
async fn respond(
    gateway: &Arc<Gateway>,
    backend: Arc<Backend>,
    request: Request,
    flight: Flight,
) -> Response<Body> {
    let mut call = Call {
        gateway: gateway.clone(),
        backend,
        request,
        flight: Some(flight),
    };
    let first = match tokio::time::timeout(gateway.config.response_timeout, call.next()).await {
        Ok(item) => item,
        Err(_) => {
            if let Some(flight) = call.flight.as_mut() {
                flight.guard.answered = true;
                flight.guard.session.forget(&flight.guard.key);
            }
            return json_error(
                StatusCode::GATEWAY_TIMEOUT,
                &call.request.raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Gateway Timeout: the MCP server did not answer within {} s (--timeout-response)",
                    gateway.config.response_timeout.as_secs_f64()
                ),
            );
        }
    };
    let first = match first {
        Item::Done(line, status) => return json(status, Bytes::from(line)),
        Item::Note(line) => line,
    };
    let rest = futures_util::stream::unfold((call, false), |(mut call, done)| async move {
        if done {
            return None;
        }
        Some(match call.next().await {
            Item::Note(line) => (sse_event(None, &line), (call, false)),
            Item::Done(line, _) => (sse_event(None, &line), (call, true)),
        })
    });
    let first = futures_util::stream::once(async move { sse_event(None, &first) });
    sse_body(first.chain(rest), SseTiming::of(gateway), || {}, None)
}

/// What a child's event becomes for the client.
enum Item {
    /// A notification for the request's stream.
    Note(Vec<u8>),
    /// The last message: the answer, an `input_required` round, or the error that ends the
    /// call, with the HTTP status it gets when it is the only message.
    Done(Vec<u8>, StatusCode),
}

/// A call being answered.
struct Call {
    gateway: Arc<Gateway>,
    backend: Arc<Backend>,
    request: Request,
    /// `None` once the call is parked.
    flight: Option<Flight>,
}

impl Call {
    /// The next thing for the client. Cancel-safe: nothing is awaited after an event is
    /// taken.
    async fn next(&mut self) -> Item {
        loop {
            let Some(flight) = self.flight.as_mut() else {
                return self.failure("the call was parked");
            };
            let event = flight
                .rx
                .recv()
                .await
                .unwrap_or_else(|| Event::Failed("the backend ended".into()));
            match event {
                Event::Answer(line) => {
                    flight.guard.answered = true;
                    return self.answer(&line);
                }
                Event::Failed(why) => {
                    flight.guard.answered = true;
                    return self.failure(&why);
                }
                Event::Message(line) => {
                    if let Some(item) = self.on_message(&line) {
                        return item;
                    }
                }
            }
        }
    }

    fn failure(&self, why: &str) -> Item {
        Item::Done(
            error_response(&self.request.raw_id, INTERNAL_ERROR, why, None),
            StatusCode::OK,
        )
    }

    fn answer(&self, line: &[u8]) -> Item {
        let raw_id = &self.request.raw_id;
        let reanswer = if self.backend.modern {
            modern_answer_for_modern
        } else {
            answer_for_modern
        };
        let Some(mut answer) = reanswer(&self.request.method, raw_id, line) else {
            return self.failure("the MCP server's answer is not JSON-RPC");
        };
        if self.request.method == "subscriptions/listen" {
            answer = retag_listen(&answer, raw_id, true).unwrap_or(answer);
        }
        let status = status_for(&answer);
        Item::Done(answer, status)
    }

    /// A notification or request of the child's during the call.
    fn on_message(&mut self, line: &[u8]) -> Option<Item> {
        let message = parse(line).ok()?;
        let name = message.method.as_deref().unwrap_or_default();
        match message.kind {
            Kind::Request => self.on_question(&message, name),
            Kind::Notification if name == "notifications/progress" => {
                // No token, no progress: the client did not ask for it.
                let token = self.request.token.clone()?;
                let mut value: Value = serde_json::from_slice(line).ok()?;
                value["params"]["progressToken"] = token;
                Some(Item::Note(
                    serde_json::to_vec(&value).expect("JSON serializes"),
                ))
            }
            // Log lines only for a request that asked for them (§4.12).
            Kind::Notification if name == "notifications/message" => {
                self.request.logs.then(|| Item::Note(line.to_vec()))
            }
            // A 2026-07-28 child's listen stream: retagged with the client's listen id.
            Kind::Notification if self.request.method == "subscriptions/listen" => {
                retag_listen(line, &self.request.raw_id, false).map(Item::Note)
            }
            _ => None,
        }
    }

    /// The child asks something. A handshake-era child's elicitation, sampling or roots
    /// request during a call that may need input becomes an `input_required` round if the
    /// client declared the capability, and a `-32021` otherwise; anything else is refused.
    fn on_question(&mut self, message: &Message<'_>, name: &str) -> Option<Item> {
        let session = self.backend.session.clone();
        let child_raw_id = message.id.map_or("null", |i| i.get()).to_owned();
        // Whatever happens below, this call's question is answered unless it is parked.
        if let Some(flight) = self.flight.as_ref() {
            session.answered_question(&flight.guard.key);
        }
        if name == "ping" {
            let pong = format!(r#"{{"jsonrpc":"2.0","id":{child_raw_id},"result":{{}}}}"#);
            let _ = session.stdin.try_send(Bytes::from(pong));
            return None;
        }
        let params: Value = message
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_else(|| json!({}));
        let required = mrtr::required_capability(name, &params)
            .filter(|_| !self.backend.modern && mrtr::may_require_input(&self.request.method));
        let Some(required) = required else {
            refuse(
                &session,
                &child_raw_id,
                METHOD_NOT_FOUND,
                &format!("the client speaks 2026-07-28 and cannot be asked {name} here"),
            );
            return None;
        };
        let question = mrtr::InputRequest {
            key: String::new(),
            method: name.to_owned(),
            params,
        };
        if !mrtr::host_can_answer(&self.request.capabilities, &question) {
            refuse(
                &session,
                &child_raw_id,
                INVALID_REQUEST,
                &format!("the client did not declare the capability {name} needs"),
            );
            // The child's call is cancelled as the guard drops unanswered.
            return Some(Item::Done(
                error_response(
                    &self.request.raw_id,
                    MISSING_CLIENT_CAPABILITY,
                    &format!(
                        "Missing required client capability: this call needs {required}, which the request's clientCapabilities do not declare"
                    ),
                    Some(json!({ "requiredCapabilities": required })),
                ),
                StatusCode::BAD_REQUEST,
            ));
        }
        let flight = self.flight.take().expect("the call is in flight");
        // Parked, it waits for the answer: it cannot be the one asking anything else.
        session.asking(&flight.guard.key);
        let question = Question::new(child_raw_id, question.method, question.params);
        Some(Item::Done(
            park(&self.gateway, &self.request, flight, question),
            StatusCode::OK,
        ))
    }
}

/// Parks a call and returns the `input_required` answer that asks its question. An
/// unanswered round expires after `--input-timeout`: the child's question is refused and
/// its call cancelled (the flight's guard drops unanswered).
fn park(gateway: &Arc<Gateway>, request: &Request, flight: Flight, question: Question) -> Vec<u8> {
    let asked = Asked {
        raw_id: &request.raw_id,
        principal: request.principal.clone(),
        method: &request.method,
        name: request.name.as_deref(),
    };
    gateway
        .parked
        .ask(flight, question, asked, |flight, question| {
            refuse(
                &flight.guard.session,
                &question.asker_raw_id,
                INTERNAL_ERROR,
                "the client did not answer within --input-timeout",
            );
        })
}

/// A retry carrying `requestState`: the parked call it names gets the client's answer to
/// its question and goes on.
async fn resume(
    gateway: &Arc<Gateway>,
    backend: Arc<Backend>,
    request: Request,
    params: &Map<String, Value>,
    state: &Value,
) -> Response<Body> {
    let retry = Retry {
        raw_id: &request.raw_id,
        principal: request.principal.as_deref(),
        method: &request.method,
        name: request.name.as_deref(),
        state: state.as_str(),
        responses: params.get("inputResponses"),
    };
    let same_child = |flight: &Flight| {
        if Arc::ptr_eq(&flight.guard.session, &backend.session)
            && !backend.session.ended.is_cancelled()
        {
            Ok(())
        } else {
            Err("the MCP server restarted while waiting for your input; call again without requestState".to_owned())
        }
    };
    let (flight, answer) = match gateway.parked.resume(&retry, same_child) {
        Resumed::Answered { call, answer } => (call, answer),
        Resumed::AskAgain(line) => return json(StatusCode::OK, Bytes::from(line)),
        Resumed::Invalid(why) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                &request.raw_id,
                INVALID_PARAMS,
                &why,
            );
        }
    };
    backend.session.answered_question(&flight.guard.key);
    if let Err(undeliverable) = backend
        .session
        .send_to_child(Bytes::from(answer), gateway.config.response_timeout)
        .await
    {
        return SendRefused::Undeliverable(undeliverable).response(gateway, &request.raw_id);
    }
    respond(gateway, backend, request, flight).await
}

/// Answers a child's request with an error (best effort: never wait on a child that is not
/// reading).
fn refuse(session: &Session, child_raw_id: &str, code: i64, message: &str) {
    let refusal = error_response(child_raw_id, code, message, None);
    let _ = session.stdin.try_send(Bytes::from(refusal));
}

/// A 2026-07-28 child's listen message with the client's listen id as its subscription id
/// (and, for the result, its JSON-RPC id already is the client's).
fn retag_listen(line: &[u8], client_raw_id: &str, result: bool) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(line).ok()?;
    let id: Value = serde_json::from_str(client_raw_id).ok()?;
    let field = if result { "result" } else { "params" };
    let meta = value
        .get_mut(field)?
        .as_object_mut()?
        .entry("_meta")
        .or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(META_SUBSCRIPTION_ID.into(), id);
    }
    Some(serde_json::to_vec(&value).expect("JSON serializes"))
}

/// The HTTP status a lone answer gets: the statuses §4.16 gives these errors.
fn status_for(answer: &[u8]) -> StatusCode {
    let code = serde_json::from_slice::<Value>(answer)
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(Value::as_i64));
    match code {
        Some(-32022..=-32020) => StatusCode::BAD_REQUEST,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A call sent to the child: if the client goes away before the answer, the child is told
/// to stop (`notifications/cancelled`) and the answer, when it comes, is dropped.
struct InFlight {
    session: Arc<Session>,
    key: IdKey,
    upstream_id: String,
    answered: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.busy.fetch_sub(1, Ordering::Relaxed);
        self.session.touch();
        if self.answered {
            return;
        }
        self.session.forget(&self.key);
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": self.upstream_id, "reason": "the client closed the stream"}});
        let _ = self.session.stdin.try_send(Bytes::from(cancel.to_string()));
        tracing::debug!(id = %self.upstream_id, "a 2026-07-28 client's call ended unanswered; cancelled in the child");
    }
}
