//! Answering the client from a call in the child: plain JSON when the answer comes first,
//! else an SSE stream of the call's notifications ending with the answer; the answer under
//! the client's id with `resultType` and modern error codes; a handshake-era child's
//! question parked as an `input_required` round.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::flight::refuse;
use crate::era::bridge::{answer_for_modern, modern_answer_for_modern};
use crate::era::{META_SUBSCRIPTION_ID, MISSING_CLIENT_CAPABILITY, mrtr};
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::message::{Kind, Message, parse};
use crate::parking::{Asked, Question};
use crate::serve::backend::Event;
use crate::serve::child_call::ChildCall;
use crate::serve::gateway::Gateway;
use crate::serve::policing::ListFilter;
use crate::serve::pool::Backend;
use crate::serve::responses::{json, json_error, sse_body, sse_event};

/// What the client asked, as far as the answer depends on it.
pub(super) struct Request {
    pub(super) raw_id: String,
    pub(super) method: String,
    pub(super) name: Option<String>,
    /// The request asked for log lines (`logLevel`).
    pub(super) logs: bool,
    /// The client capabilities declared in this request.
    pub(super) capabilities: Value,
    /// The client's progress token, put back on the child's progress notifications.
    pub(super) token: Option<Value>,
    pub(super) principal: Option<String>,
    /// What the policy lets this principal see of a list answer.
    pub(super) filter: Option<ListFilter>,
    /// A `tools/call` sent to a handshake-era child as a task: its `CreateTaskResult` is
    /// held for the client.
    pub(super) as_task: bool,
}

/// Answers the client from a call in the child: plain JSON when the first thing that comes
/// is the answer, else an SSE stream of its notifications that ends with the answer.
pub(super) async fn respond(
    gateway: &Arc<Gateway>,
    backend: Arc<Backend>,
    request: Request,
    flight: ChildCall,
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
                flight.guard.session.backend.forget(&flight.guard.key);
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
    sse_body(first.chain(rest), gateway.sse_timing(), || {}, None)
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
    flight: Option<ChildCall>,
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
        if self.request.as_task
            && let Some((line, status)) = crate::serve::tasks::adopt(
                &self.gateway,
                &self.backend,
                self.request.principal.clone(),
                raw_id,
                line,
            )
        {
            return Item::Done(line, status);
        }
        let reanswer = if self.backend.modern {
            modern_answer_for_modern
        } else {
            answer_for_modern
        };
        let filtered = self
            .request
            .filter
            .as_ref()
            .map(|filter| filter.apply(line));
        let line = filtered.as_deref().unwrap_or(line);
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
    /// client declared the capability. Otherwise an elicitation or sampling request fails
    /// the call with `-32021`, and a roots request is refused to the child while the call
    /// goes on (`mrtr::belongs_to_the_call`); anything else is refused.
    fn on_question(&mut self, message: &Message<'_>, name: &str) -> Option<Item> {
        let session = self.backend.session.clone();
        let child_raw_id = message.id.map_or("null", |i| i.get()).to_owned();
        // Whatever happens below, this call's question is answered unless it is parked.
        if let Some(flight) = self.flight.as_ref() {
            session.backend.set_asking(&flight.guard.key, false);
        }
        if name == "ping" {
            let pong = format!(r#"{{"jsonrpc":"2.0","id":{child_raw_id},"result":{{}}}}"#);
            session.backend.send_now(Bytes::from(pong));
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
        if !mrtr::host_can_answer(&self.request.capabilities, &question)
            && !mrtr::belongs_to_the_call(name)
        {
            // Perhaps not this call's question at all: the child hears what a client
            // without the capability would say, and the call goes on.
            tracing::debug!(session = %crate::serve::sessions::short(&session.id), "the child asked {name}, which this request's client did not declare; refused to the child, the call goes on");
            refuse(
                &session,
                &child_raw_id,
                METHOD_NOT_FOUND,
                &format!("the client did not declare the capability {name} needs"),
            );
            return None;
        }
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
        session.backend.set_asking(&flight.guard.key, true);
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
fn park(
    gateway: &Arc<Gateway>,
    request: &Request,
    flight: ChildCall,
    question: Question,
) -> Vec<u8> {
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
pub(super) fn status_for(answer: &[u8]) -> StatusCode {
    let code = serde_json::from_slice::<Value>(answer)
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(Value::as_i64));
    match code {
        Some(-32022..=-32020) => StatusCode::BAD_REQUEST,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}
