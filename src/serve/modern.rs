//! 2026-07-28 requests: the validation ladder, then the principal's pooled (handshake-era)
//! backend. Each request goes to the child under a gateway id (`gw-N`) with the envelope
//! stripped and its progress token remapped, and comes back under the client's id with
//! `resultType`, cache hints and modern error codes. Closing the response stream cancels the
//! call in the child.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Gateway;
use super::ladder;
use super::pool::Unavailable;
use super::routes::{json, json_error, sse, sse_event};
use super::session::{Conflict, Event, Session};
use super::sessions::Refused;
use crate::era::bridge::{answer_for_modern, discover_result};
use crate::era::envelope;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::message::{IdKey, Kind, Message, parse};

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
    let backend = match gateway.pool.backend(gateway, principal).await {
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
    if method == "server/discover" {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{}}}"#,
            discover_result(&backend.initialize)
        );
        return json(StatusCode::OK, Bytes::from(line));
    }
    let mut params = envelope::params_object(parsed.params).unwrap_or_default();
    envelope::strip(&mut params);
    let upstream_id = gateway.pool.next_id();
    // The client's progress token is the client's: the child sees the gateway's id as the
    // token, and notifications go back with the original.
    let original_token = params
        .get_mut("_meta")
        .and_then(Value::as_object_mut)
        .and_then(|meta| meta.insert("progressToken".into(), upstream_id.clone().into()));
    if original_token.is_none()
        && let Some(Value::Object(meta)) = params.get_mut("_meta")
    {
        meta.remove("progressToken");
    }
    let line = Bytes::from(envelope::request_line(
        &serde_json::to_string(&upstream_id).expect("a string"),
        method,
        &params,
    ));
    let session = backend.session.clone();
    let key = IdKey::Str(upstream_id.clone());
    let (tx, mut rx) = mpsc::channel(64);
    let token = original_token.as_ref().map(|_| format!("s:{upstream_id}"));
    match session.register(key.clone(), &line, token, tx) {
        Ok(_) => {}
        Err(Conflict::Full) => {
            return json_error(
                StatusCode::TOO_MANY_REQUESTS,
                &raw_id,
                INTERNAL_ERROR,
                &format!(
                    "Too Many Requests: --max-requests-per-session ({}) requests are in flight on this backend",
                    gateway.config.max_requests_per_session
                ),
            );
        }
        Err(Conflict::DifferentRequest) => {
            return json_error(
                StatusCode::CONFLICT,
                &raw_id,
                INVALID_REQUEST,
                "Conflict: gateway id reused",
            );
        }
    }
    session.busy.fetch_add(1, Ordering::Relaxed);
    let mut call = InFlight {
        session: session.clone(),
        key,
        upstream_id,
        answered: false,
    };
    if let Err(undeliverable) = session
        .send_to_child(line, gateway.config.response_timeout)
        .await
    {
        call.answered = true;
        session.forget(&call.key);
        return super::routes::undeliverable_response(gateway, &raw_id, &undeliverable);
    }
    let logs = claim.log_level.is_some();
    let first = loop {
        let event = match tokio::time::timeout(gateway.config.response_timeout, rx.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => Event::Failed("the backend ended".into()),
            Err(_) => {
                call.answered = true;
                session.forget(&call.key);
                return json_error(
                    StatusCode::GATEWAY_TIMEOUT,
                    &raw_id,
                    INTERNAL_ERROR,
                    &format!(
                        "Gateway Timeout: the MCP server did not answer within {} s (--timeout-response)",
                        gateway.config.response_timeout.as_secs_f64()
                    ),
                );
            }
        };
        match translate(
            &session,
            event,
            method,
            &raw_id,
            original_token.as_ref(),
            logs,
        )
        .await
        {
            Some(item) => break item,
            None => continue,
        }
    };
    match first {
        Item::Done(line) => {
            call.answered = true;
            json(StatusCode::OK, Bytes::from(line))
        }
        Item::Note(line) => {
            let keepalive = gateway.config.keepalive;
            let closing = gateway.closing.clone();
            let method = method.to_owned();
            let state = Stream {
                call,
                rx,
                first: Some(line),
                done: false,
                raw_id,
                method,
                token: original_token,
                logs,
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
                    loop {
                        let event = tokio::select! {
                            event = state.rx.recv() => event.unwrap_or(Event::Failed("the backend ended".into())),
                            _ = tokio::time::sleep(keepalive) => return Some((Ok(Bytes::from_static(b": keepalive\n\n")), state)),
                            _ = closing.cancelled() => return None,
                        };
                        match translate(
                            &state.call.session,
                            event,
                            &state.method,
                            &state.raw_id,
                            state.token.as_ref(),
                            state.logs,
                        )
                        .await
                        {
                            Some(Item::Note(line)) => {
                                return Some((Ok(sse_event(None, &line)), state));
                            }
                            Some(Item::Done(line)) => {
                                state.done = true;
                                state.call.answered = true;
                                return Some((Ok(sse_event(None, &line)), state));
                            }
                            None => continue,
                        }
                    }
                }
            });
            sse(Body::from_stream(stream))
        }
    }
}

/// What a child's event becomes for the client.
enum Item {
    /// A notification for the request's stream.
    Note(Vec<u8>),
    /// The answer (or the error that ends the call).
    Done(Vec<u8>),
}

/// Translates one event; `None` for what a 2026-07-28 client must not see.
async fn translate(
    session: &Session,
    event: Event,
    method: &str,
    raw_id: &str,
    token: Option<&Value>,
    logs: bool,
) -> Option<Item> {
    match event {
        Event::Answer(line) => Some(Item::Done(
            answer_for_modern(method, raw_id, &line).unwrap_or_else(|| {
                error_response(
                    raw_id,
                    INTERNAL_ERROR,
                    "the MCP server's answer is not JSON-RPC",
                    None,
                )
            }),
        )),
        Event::Failed(why) => Some(Item::Done(error_response(
            raw_id,
            INTERNAL_ERROR,
            &why,
            None,
        ))),
        Event::Message(line) => {
            let message = parse(&line).ok()?;
            let name = message.method.as_deref().unwrap_or_default();
            match message.kind {
                // The server asks something: a 2026-07-28 client can only be asked through
                // input_required, which this gateway does not offer yet; refuse it upstream.
                Kind::Request => {
                    let id = message.id.map_or("null", |i| i.get());
                    let refusal = error_response(
                        id,
                        METHOD_NOT_FOUND,
                        &format!(
                            "the client speaks 2026-07-28 and cannot be asked {name} by this gateway"
                        ),
                        None,
                    );
                    // Never wait on a child that is not reading: the refusal is best effort.
                    let _ = session.stdin.try_send(Bytes::from(refusal));
                    None
                }
                Kind::Notification if name == "notifications/progress" => {
                    let mut value: Value = serde_json::from_slice(&line).ok()?;
                    value["params"]["progressToken"] = token.cloned().unwrap_or(Value::Null);
                    Some(Item::Note(
                        serde_json::to_vec(&value).expect("JSON serializes"),
                    ))
                }
                // Log lines only for a request that asked for them (§4.12).
                Kind::Notification if name == "notifications/message" && logs => {
                    Some(Item::Note(line.to_vec()))
                }
                _ => None,
            }
        }
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
        tracing::debug!(id = %self.upstream_id, "a 2026-07-28 client closed its stream; cancelled in the child");
    }
}

struct Stream {
    call: InFlight,
    rx: mpsc::Receiver<Event>,
    first: Option<Vec<u8>>,
    done: bool,
    raw_id: String,
    method: String,
    token: Option<Value>,
    logs: bool,
}
