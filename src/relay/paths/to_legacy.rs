//! A 2026-07-28 host in front of a legacy server. The relay runs the handshake upstream with
//! the host's declared capabilities, answers `server/discover` from it, strips the envelope
//! from requests, gives results the fields a modern host requires, and serves
//! `subscriptions/listen` itself from the session's notifications.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::local_listen::listen;
use super::modern_host::{ModernHost, ToLegacy};
use super::parked::UpstreamCall;
use super::passthrough::host_claim;
use super::server_messages::{divert_server_messages, on_the_way};
use crate::era::bridge::discover_result;
use crate::era::envelope::{self, Claim};
use crate::era::mrtr::{self, InputRequest};
use crate::era::request::request_line;
use crate::era::tasks;
use crate::era::{self, LATEST_LEGACY_VERSION};
use crate::jsonrpc::error::{METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::message::{self, IdKey};
use crate::parking::{Asked, Question, Resumed, Retry};
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::gate::Failure;
use crate::relay::link::session::Wire;
use crate::relay::methods::is_replay_safe;
use crate::relay::request::Call;

/// Serves one request of a modern host against a legacy server.
pub async fn serve(path: Arc<ToLegacy>, request: Call) {
    if let Err(failure) = answer(&path, &request).await {
        path.ctx.gate.fail(&request.id, &failure).await;
    }
}

async fn answer(path: &Arc<ToLegacy>, request: &Call) -> Result<(), Failure> {
    let parsed =
        message::parse(&request.line).map_err(|_| Failure::upstream("unparsable request"))?;
    let claim = host_claim(parsed.params)?;
    if request.method == "ping" {
        return Err(Failure {
            code: METHOD_NOT_FOUND,
            message: "Method not found: ping does not exist in protocol 2026-07-28".into(),
            data: None,
        });
    }
    if request.method.starts_with("tasks/") {
        // The server's 2025-11-25 tasks are not offered to a 2026-07-28 host (as serve).
        let (code, message, data) =
            tasks::hidden_tasks_refusal(&request.method, &claim.capabilities);
        return Err(Failure {
            code,
            message,
            data,
        });
    }
    let initialize = ensure_session(path, &claim).await?;
    match request.method.as_str() {
        "server/discover" => {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
                request.raw_id,
                discover_result(initialize)
            );
            path.ctx.gate.deliver(&request.id, line.into_bytes()).await;
            Ok(())
        }
        "subscriptions/listen" => listen(path, request, parsed.params, initialize).await,
        _ => forward(path, request, parsed.params, &claim, initialize).await,
    }
}

/// The handshake, once per process, with the first request's capabilities and client
/// info (the server learns nothing it was not told by the host).
async fn ensure_session<'a>(path: &'a Arc<ToLegacy>, claim: &Claim) -> Result<&'a Value, Failure> {
    path.host
        .session
        .get_or_try_init(|| async {
            let params = json!({
                "protocolVersion": LATEST_LEGACY_VERSION,
                "capabilities": claim.capabilities,
                "clientInfo": claim.client_info.clone().unwrap_or_else(era::relay_info),
            })
            .to_string();
            path.ctx
                .link
                .upstream
                .remember_host_initialize(RawValue::from_string(params.clone()).ok().as_deref());
            let answer = path
                .ctx
                .link
                .upstream
                .initialize("mcp-stdio-initialize", &params)
                .await?;
            #[derive(Deserialize)]
            struct Reply {
                result: Option<Value>,
                error: Option<Value>,
            }
            let reply: Reply = serde_json::from_slice(&answer)
                .map_err(|_| Failure::upstream("the server's initialize answer is not JSON-RPC"))?;
            match (reply.result, reply.error) {
                (Some(result), _) => {
                    divert_server_messages(path);
                    path.ctx.restart_server_stream();
                    Ok(result)
                }
                (None, error) => Err(Failure::upstream(format!(
                    "the legacy server refused initialize: {}",
                    error.map(|e| e.to_string()).unwrap_or_default()
                ))),
            }
        })
        .await
}

/// Removes the host→upstream id mapping when the request ends, however it ends.
struct InFlight<'a> {
    host: &'a ModernHost,
    id: IdKey,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.host
            .upstream_ids
            .lock()
            .expect("ids lock")
            .remove(&self.id);
    }
}

async fn forward(
    path: &Arc<ToLegacy>,
    request: &Call,
    params: Option<&RawValue>,
    claim: &Claim,
    initialize: &Value,
) -> Result<(), Failure> {
    let method = request.method.as_str();
    let mut params = envelope::params_object(params).unwrap_or_default();
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let parkable = mrtr::may_require_input(method);
    if parkable && let Some(Value::String(state)) = params.get("requestState") {
        return resume(path, request, claim, &params, state, name).await;
    }
    envelope::strip(&mut params);
    if method == "tools/call" {
        // 2026-07-28 has no `task` parameter: one sent anyway would bring back a nested
        // 2025-11-25 task this host cannot read.
        params.remove("task");
    }
    if let Some(level) = &claim.log_level
        && initialize.pointer("/capabilities/logging").is_some()
    {
        set_log_level(path, level).await;
    }
    let id = path.ctx.next_upstream_id("call");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let body = Bytes::from(request_line(&raw_id, method, &params));
    if parkable {
        let flight = take_off(path, body, id, raw_id, claim.log_level.clone());
        return drive(path, request, claim, flight, name).await;
    }
    path.host
        .upstream_ids
        .lock()
        .expect("ids lock")
        .insert(request.id.clone(), raw_id.clone());
    let _in_flight = InFlight {
        host: &path.host,
        id: request.id.clone(),
    };
    let outgoing = Outgoing {
        body,
        id: &IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Legacy { initialize: false },
        replay_safe: is_replay_safe(method),
    };
    let log_level = claim.log_level.clone();
    let host = &path.host;
    let out = path.ctx.gate.outbox().clone();
    let answer = call(&path.ctx, outgoing, &mut |message, payload| {
        on_the_way(host, &out, message, payload, log_level.as_deref(), None)
    })
    .await?;
    let line = modern_answer(method, &request.raw_id, &answer)?;
    path.ctx.gate.deliver(&request.id, line).await;
    Ok(())
}

/// Starts a call that may ask the host something: it runs in its own task, so it can
/// outlive the host request that started it while the relay waits for the host's retry.
fn take_off(
    path: &Arc<ToLegacy>,
    body: Bytes,
    id: String,
    raw_id: String,
    log_level: Option<String>,
) -> UpstreamCall {
    let (questions_tx, questions) = mpsc::unbounded_channel();
    let (answer_tx, answer) = oneshot::channel();
    let number = path
        .host
        .next_flight
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    path.host
        .flights
        .lock()
        .expect("flights lock")
        .insert(number, questions_tx.clone());
    let worker = path.clone();
    let upstream_raw_id = raw_id.clone();
    let task = tokio::spawn(async move {
        let out = worker.ctx.gate.outbox().clone();
        let outgoing = Outgoing {
            body,
            id: &IdKey::Str(id),
            raw_id: &raw_id,
            wire: Wire::Legacy { initialize: false },
            replay_safe: false,
        };
        let host = &worker.host;
        let answer = call(&worker.ctx, outgoing, &mut |message, payload| {
            on_the_way(
                host,
                &out,
                message,
                payload,
                log_level.as_deref(),
                Some(&questions_tx),
            )
        })
        .await;
        worker
            .host
            .flights
            .lock()
            .expect("flights lock")
            .remove(&number);
        let _ = answer_tx.send(answer);
    })
    .abort_handle();
    UpstreamCall {
        questions,
        answer,
        task,
        upstream_raw_id,
    }
}

/// What a flight did next.
enum Next {
    Answer(Result<Vec<u8>, Failure>),
    Question(Question),
}

/// Follows a flight for the host request `request`: delivers its answer, or parks it and
/// answers the host with the server's question as an `input_required` result.
async fn drive(
    path: &Arc<ToLegacy>,
    request: &Call,
    claim: &Claim,
    mut flight: UpstreamCall,
    name: Option<String>,
) -> Result<(), Failure> {
    path.host
        .upstream_ids
        .lock()
        .expect("ids lock")
        .insert(request.id.clone(), flight.upstream_raw_id.clone());
    let _in_flight = InFlight {
        host: &path.host,
        id: request.id.clone(),
    };
    loop {
        let next = tokio::select! {
            answer = &mut flight.answer => Next::Answer(answer.unwrap_or_else(|_| {
                Err(Failure::upstream("the upstream call ended without an answer"))
            })),
            Some(question) = flight.questions.recv() => Next::Question(question),
        };
        let question = match next {
            Next::Answer(answer) => {
                let line = modern_answer(&request.method, &request.raw_id, &answer?)?;
                path.ctx.gate.deliver(&request.id, line).await;
                return Ok(());
            }
            Next::Question(question) => question,
        };
        let asked = InputRequest {
            key: question.key.into(),
            method: question.method.clone(),
            params: question.params.clone(),
        };
        let room = path.parked.count() < path.ctx.config.max_in_flight;
        if !room || !mrtr::host_can_answer(&claim.capabilities, &asked) {
            let why = if room {
                format!(
                    "the host did not declare the capability {} needs",
                    question.method
                )
            } else {
                format!(
                    "--max-in-flight ({}) calls already wait for the host's input",
                    path.ctx.config.max_in_flight
                )
            };
            let refusal = error_response(&question.asker_raw_id, METHOD_NOT_FOUND, &why, None);
            path.ctx.link.deliver(Bytes::from(refusal)).await;
            continue;
        }
        park(path, request, flight, question, name.as_deref()).await;
        return Ok(());
    }
}

/// Parks a call and gives the host its question with the state that resumes it. A round
/// the host never retries cancels the call upstream.
async fn park(
    path: &Arc<ToLegacy>,
    request: &Call,
    flight: UpstreamCall,
    question: Question,
    name: Option<&str>,
) {
    tracing::debug!(id = %request.id, "a legacy server asked a question during a call; parked it for the host's retry");
    let asked = Asked {
        raw_id: &request.raw_id,
        principal: None,
        method: &request.method,
        name,
    };
    let ctx = path.ctx.clone();
    let line = path.parked.ask(flight, question, asked, move |flight, _| {
        let cancel = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the host never answered"}}}}"#,
            flight.upstream_raw_id
        );
        drop(flight);
        tokio::spawn(async move { ctx.link.deliver(Bytes::from(cancel)).await });
    });
    path.ctx.gate.deliver(&request.id, line).await;
}

/// A retry of a parked call: hands the host's answer to the server's waiting request and
/// follows the call on.
async fn resume(
    path: &Arc<ToLegacy>,
    request: &Call,
    claim: &Claim,
    params: &serde_json::Map<String, Value>,
    state: &str,
    name: Option<String>,
) -> Result<(), Failure> {
    let retry = Retry {
        raw_id: &request.raw_id,
        principal: None,
        method: &request.method,
        name: name.as_deref(),
        state: Some(state),
        responses: params.get("inputResponses"),
    };
    match path.parked.resume(&retry, |_| Ok(())) {
        Resumed::Invalid(why) => Err(Failure {
            code: crate::jsonrpc::error::INVALID_PARAMS,
            message: why,
            data: None,
        }),
        Resumed::AskAgain(line) => {
            path.ctx.gate.deliver(&request.id, line).await;
            Ok(())
        }
        Resumed::Answered {
            call: flight,
            answer,
        } => {
            path.ctx.link.deliver(Bytes::from(answer)).await;
            drive(path, request, claim, flight, name).await
        }
    }
}

/// Sends `logging/setLevel` upstream when a request asks for a level not yet set, so the
/// server emits what the host wants; what reaches the host is still filtered per request.
async fn set_log_level(path: &ToLegacy, level: &str) {
    let mut sent = path.host.log_level_sent.lock().await;
    if sent.as_deref() == Some(level) {
        return;
    }
    let id = path.ctx.next_upstream_id("loglevel");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let mut params = serde_json::Map::new();
    params.insert("level".into(), level.into());
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, "logging/setLevel", &params)),
        id: &IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Legacy { initialize: false },
        replay_safe: true,
    };
    match call(&path.ctx, outgoing, &mut |_, _| Aside::Ignore).await {
        Ok(_) => *sent = Some(level.to_owned()),
        Err(failure) => tracing::debug!(problem = %failure.message, "logging/setLevel failed"),
    }
}

/// A legacy answer as a modern host must see it: under the host's id, results with
/// `resultType` (and cache hints), error codes the modern era allows.
fn modern_answer(method: &str, host_raw_id: &str, answer: &[u8]) -> Result<Vec<u8>, Failure> {
    crate::era::bridge::answer_for_modern(method, host_raw_id, answer)
        .ok_or_else(|| Failure::upstream("the upstream's answer is not valid JSON-RPC"))
}
