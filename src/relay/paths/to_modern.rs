//! A legacy host in front of a 2026-07-28 server. The relay answers the handshake itself
//! (from `server/discover`), stamps the host's capabilities onto every request, answers
//! `ping` and `logging/setLevel` locally, carries subscriptions on `subscriptions/listen`,
//! and turns `input_required` results into real requests to the host, then retries.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::host_profile::{HostProfile, InitializeParams};
use super::host_tasks::{self, HostTasks};
use super::listen::Listens;
use super::own_request::own_request;
use super::tool_args::{add_param_headers, envelope_only, refresh};
use crate::era::HEADER_MISMATCH;
use crate::era::bridge::initialize_result;
use crate::era::envelope;
use crate::era::mrtr::{self, InputRequest};
use crate::jsonrpc::error::{INVALID_PARAMS, with_error_object};
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::lines::result_line;
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::context::Ctx;
use crate::relay::detect::modern_headers_named;
use crate::relay::eras::UpstreamEra;
use crate::relay::gate::Failure;
use crate::relay::link::response::error_code;
use crate::relay::link::session::Wire;
use crate::relay::methods::is_replay_safe;
use crate::relay::request::Call;

/// The path of a legacy host in front of a modern server: what the host declared, its
/// subscriptions carried on `subscriptions/listen`, and the context its tasks run in.
pub struct ToModern {
    ctx: Arc<Ctx>,
    profile: Arc<HostProfile>,
    listens: Listens,
    /// The host's 2025-11-25 tasks, run on the server's extension.
    tasks: Arc<HostTasks>,
}

impl ToModern {
    pub fn new(ctx: Arc<Ctx>) -> Arc<Self> {
        let profile = Arc::new(HostProfile::default());
        Arc::new(ToModern {
            listens: Listens::new(profile.clone()),
            tasks: HostTasks::new(ctx.clone(), profile.clone()),
            ctx,
            profile,
        })
    }

    /// Keeps what the host declared in `initialize`, whichever path answers it (the
    /// upstream's era may change later, and every translated request needs it).
    pub fn remember_initialize(&self, params: Option<&RawValue>) {
        self.profile.remember_initialize(params);
    }

    /// Starts carrying the host's change notifications on `subscriptions/listen`, once the
    /// host has finished its handshake.
    pub fn start_listening(&self, version: &str, capabilities: Option<&Value>) {
        self.listens.start(&self.ctx, version, capabilities);
    }
}

/// Serves one legacy request against a modern server speaking `version`.
pub async fn serve(
    path: Arc<ToModern>,
    request: Call,
    version: String,
    discover: Option<Arc<Value>>,
) {
    if let Err(failure) = answer(&path, &request, &version, discover).await {
        path.ctx.gate.fail(&request.id, &failure).await;
    }
}

async fn answer(
    path: &Arc<ToModern>,
    request: &Call,
    version: &str,
    discover: Option<Arc<Value>>,
) -> Result<(), Failure> {
    let params = request.params.as_deref();
    match request.method.as_str() {
        "initialize" => {
            let params: InitializeParams = params
                .and_then(|p| serde_json::from_slice(p).ok())
                .unwrap_or_default();
            let discover = match discover {
                Some(discover) => Some(discover),
                None => fetch_discover(path, version).await,
            };
            let mut result =
                initialize_result(discover.as_deref(), params.protocol_version.as_deref());
            offer_tasks(&mut result, discover.as_deref());
            tracing::info!(
                protocol_version = %result["protocolVersion"],
                "answered the host's initialize from the 2026-07-28 server's server/discover"
            );
            deliver(path, request, &result).await;
        }
        "ping" => deliver(path, request, &json!({})).await,
        "logging/setLevel" => {
            let level = param_string(params, "level")
                .ok_or_else(|| invalid_params("logging/setLevel needs params.level"))?;
            path.profile.set_log_level(level);
            deliver(path, request, &json!({})).await;
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            let uri = param_string(params, "uri")
                .ok_or_else(|| invalid_params("params.uri is required"))?;
            if request.method == "resources/subscribe" {
                path.listens.subscribe(&path.ctx, version, uri);
            } else {
                path.listens.unsubscribe(&uri);
            }
            deliver(path, request, &json!({})).await;
        }
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" => {
            host_tasks::serve(&path.tasks, request, version).await;
        }
        "tools/call" if has_task_parameter(params) => call_as_task(path, request, version).await?,
        _ => forward(path, request, version, params, false).await?,
    }
    Ok(())
}

/// The 2025-11-25 `tasks` capability for a 2025-11-25 host when the server offers the
/// tasks extension: the relay runs the host's tasks on it.
fn offer_tasks(result: &mut Value, discover: Option<&Value>) {
    let offered = discover.is_some_and(|d| crate::era::tasks::offers_extension(&d["capabilities"]));
    if offered && result["protocolVersion"] == "2025-11-25" {
        result["capabilities"]["tasks"] = crate::era::tasks::legacy_capability();
    }
}

/// Whether a `tools/call` asks to run as a task (2025-11-25's `task` parameter).
fn has_task_parameter(params: Option<&[u8]>) -> bool {
    params.is_some_and(|p| memchr::memmem::find(p, b"\"task\"").is_some())
        && params
            .and_then(|p| serde_json::from_slice::<Map<String, Value>>(p).ok())
            .is_some_and(|p| p.get("task").is_some_and(Value::is_object))
}

/// A task-augmented call: sent opted in to the extension without its `task` parameter (the
/// server decides, in 2026-07-28), answered with a 2025-11-25 `CreateTaskResult`.
async fn call_as_task(path: &Arc<ToModern>, request: &Call, version: &str) -> Result<(), Failure> {
    let max = path.ctx.config.max_tasks;
    if !path.tasks.has_room(max) {
        return Err(Failure {
            code: crate::jsonrpc::error::INTERNAL_ERROR,
            message: format!(
                "Too many tasks: this host holds --max-tasks ({max}) tasks; wait for one to end (or cancel one) and call again"
            ),
            data: None,
        });
    }
    let mut params: Map<String, Value> = request
        .params
        .as_deref()
        .and_then(|p| serde_json::from_slice(p).ok())
        .unwrap_or_default();
    params.remove("task");
    let params = serde_json::to_vec(&params).expect("a JSON map serializes");
    forward(path, request, version, Some(&params), true).await
}

/// A string member of the request's params.
fn param_string(params: Option<&[u8]>, key: &str) -> Option<String> {
    params
        .and_then(|p| serde_json::from_slice::<Value>(p).ok())
        .and_then(|p| p.get(key).and_then(Value::as_str).map(str::to_owned))
}

/// The server's DiscoverResult, asked with the host's envelope (the probe did not get one).
async fn fetch_discover(path: &ToModern, version: &str) -> Option<Arc<Value>> {
    let mut params = Map::new();
    envelope::stamp(&mut params, &path.profile.get().stamp(version));
    let answer = own_request(&path.ctx, version, "server/discover", &params)
        .await
        .ok()?;
    let result = Arc::new(
        serde_json::from_slice::<Value>(&answer)
            .ok()?
            .get("result")?
            .clone(),
    );
    path.ctx.eras.set_upstream(UpstreamEra::Modern {
        version: version.to_owned(),
        discover: Some(result.clone()),
    });
    Some(result)
}

/// The upstream's answer, borrowed from its line.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// Sends a host request upstream with the envelope, running as many input rounds as the
/// server needs (up to `--max-input-rounds`). The host's params are copied as written, with
/// the envelope spliced into `_meta`; they are parsed into a tree only for the rare rounds
/// that need one (an unknown tool, `input_required`).
async fn forward(
    path: &Arc<ToModern>,
    request: &Call,
    version: &str,
    params: Option<&[u8]>,
    as_task: bool,
) -> Result<(), Failure> {
    let method = request.method.as_str();
    let members = if as_task {
        path.profile.opted_in_members(version)
    } else {
        path.profile.stamp_members(version)
    };
    let stamped = envelope::stamped_params(params, &members)
        .ok_or_else(|| invalid_params("params must be an object"))?;
    let name = crate::era::headers::name_field(method)
        .and_then(|field| stamped.get(field))
        .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok());
    let name = name.as_deref();
    let arguments = stamped.get("arguments");
    // The params as a tree, for the rare rounds that need one. `None` when the host's text
    // holds what a tree cannot (a number out of range, a lone surrogate): passed on as
    // written, but never rebuilt into something else.
    let tree = || serde_json::from_str::<Map<String, Value>>(&stamped.text).ok();
    let mut body_params: Cow<'_, str> = Cow::Borrowed(&stamped.text);
    let max_rounds = path.ctx.config.max_input_rounds;
    let mut rounds = 0;
    let mut relisted = false;
    loop {
        let id = path.ctx.next_upstream_id("call");
        let raw_id = serde_json::to_string(&id).expect("a string serializes");
        let mut headers = modern_headers_named(version, method, name)?;
        if method == "tools/call" {
            add_param_headers(
                &path.ctx,
                version,
                name,
                arguments,
                || envelope_only(tree().as_ref()),
                &mut headers,
            )
            .await?;
        }
        let body = crate::era::request::request_text(&raw_id, method, &body_params);
        let outgoing = Outgoing {
            body: Bytes::from(body),
            id: &crate::jsonrpc::message::IdKey::Str(id),
            raw_id: &raw_id,
            wire: Wire::Modern {
                headers: &headers,
                long_lived: false,
            },
            replay_safe: is_replay_safe(method),
        };
        let answer = call(&path.ctx, outgoing, &mut |_, payload| {
            Aside::Host(one_line(payload).into_owned())
        })
        .await?;
        let reply: Reply<'_> = serde_json::from_slice(&answer)
            .map_err(|_| Failure::upstream("the upstream's answer is not valid JSON-RPC"))?;
        if let Some(error) = reply.error {
            if method == "tools/call" && !relisted && error_code(&answer) == Some(HEADER_MISMATCH) {
                relisted = true;
                refresh(&path.ctx, version, &envelope_only(tree().as_ref())).await?;
                continue;
            }
            path.ctx
                .gate
                .deliver(&request.id, with_error_object(&request.raw_id, error))
                .await;
            return Ok(());
        }
        let result = reply.result.map_or("{}", RawValue::get);
        if mrtr::may_require_input(method) && mrtr::requires_input(result) {
            if rounds >= max_rounds {
                return give_up(path, request, &format!(
                    "the server still needed input after {max_rounds} rounds (--max-input-rounds); the call was abandoned"
                )).await;
            }
            rounds += 1;
            match next_round(path, result, tree()).await {
                Ok(params) => body_params = Cow::Owned(params),
                Err(why) => return give_up(path, request, &why).await,
            }
            continue;
        }
        if as_task {
            let result: Value = serde_json::from_str(result).unwrap_or_default();
            deliver(
                path,
                request,
                &host_tasks::created(&path.tasks, version, &result),
            )
            .await;
        } else {
            deliver_result(path, request, result).await;
        }
        return Ok(());
    }
}

/// The params of the next round once the host has answered the questions in `result`
/// (an `input_required` result), or why there can be none. `original`: the request's
/// params as a tree (`None` when they hold what a tree cannot).
async fn next_round(
    path: &ToModern,
    result: &str,
    original: Option<Map<String, Value>>,
) -> Result<String, String> {
    let input = mrtr::read(result)?;
    let capabilities = path.profile.get().capabilities;
    let responses = ask_host(path, &capabilities, &input.requests).await?;
    let Some(original) = original else {
        return Err("the request's params hold a value this relay cannot re-send (a number out of range or a lone surrogate), so the server's question cannot be answered".into());
    };
    Ok(mrtr::retry_params(
        &original,
        responses,
        input.request_state.as_deref(),
    ))
}

/// The host's answer: the server's result under the host's id (a `tools/list` filtered).
async fn deliver_result(path: &ToModern, request: &Call, result: &str) {
    let line = result_line(&request.raw_id, result);
    let line = if request.method == "tools/list" {
        path.ctx.tools.filter_answer(line)
    } else {
        line
    };
    path.ctx.gate.deliver(&request.id, line).await;
}

/// Puts each embedded request to the host as a real request, all at once, and collects the
/// answers under the server's keys.
async fn ask_host(
    path: &ToModern,
    capabilities: &Value,
    requests: &[InputRequest],
) -> Result<Map<String, Value>, String> {
    for request in requests {
        if !mrtr::host_can_answer(capabilities, request) {
            return Err(format!(
                "the server asked for {} ({:?}), which the host did not declare it supports",
                request.method, request.key
            ));
        }
    }
    let out = path.ctx.gate.outbox();
    let timeout = path.ctx.config.input_timeout;
    let asks = requests.iter().map(|request| {
        let mut params = request.params.clone();
        // 2025-11-25 hosts expect an elicitationId on URL-mode elicitations.
        if request.method == "elicitation/create"
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && params.get("elicitationId").is_none()
        {
            params["elicitationId"] = path.ctx.next_upstream_id("elicitation").into();
        }
        async move {
            let answer = path
                .ctx
                .host_requests
                .ask(out, &request.method, &params, timeout)
                .await?;
            Ok::<_, String>((request.key.clone(), answer))
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    answers.into_iter().collect()
}

/// Ends a call that cannot go on: a tool error the model can read for `tools/call`, a
/// JSON-RPC error for the rest.
async fn give_up(path: &ToModern, request: &Call, why: &str) -> Result<(), Failure> {
    tracing::info!(id = %request.id, reason = %why, "a multi-round call could not be completed");
    if request.method == "tools/call" {
        deliver(path, request, &mrtr::tool_error_result(why)).await;
        return Ok(());
    }
    Err(Failure::upstream(why))
}

async fn deliver(path: &ToModern, request: &Call, result: &Value) {
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
        request.raw_id,
        serde_json::to_string(result).expect("JSON serializes")
    );
    path.ctx.gate.deliver(&request.id, line.into_bytes()).await;
}

fn invalid_params(message: &str) -> Failure {
    Failure {
        code: INVALID_PARAMS,
        message: format!("Invalid params: {message}"),
        data: None,
    }
}
