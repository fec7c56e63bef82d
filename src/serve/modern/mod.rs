//! 2026-07-28 requests: the validation ladder, then the principal's pooled backend. Each
//! request goes to the child under a gateway id (`gw-N`) with its progress token remapped
//! (and, for a handshake-era child, the envelope stripped), and comes back under the
//! client's id with `resultType`, cache hints and modern error codes. A handshake-era
//! child's questions during a call become `input_required` rounds (the call stays parked
//! until the retry). Closing the response stream cancels the call in the child.

mod answer;
mod flight;

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Map, Value};

use super::audited::{MemberLookup, RefusedBy};
use super::gateway::{Asked, Gateway};
use super::ladder;
use super::policing::Verdict;
use super::pool::{Backend, Unavailable};
use super::responses::{json, json_error};
use super::sessions::Refused;
use super::tasks::{self, Planned};
use crate::era::bridge::{answer_for_modern, discover_result};
use crate::era::tasks::TaskSupport;
use crate::era::{META_CLIENT_CAPABILITIES, META_CLIENT_INFO, envelope, mrtr};
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::message::{Kind, Message};
use crate::parking::{Resumed, Retry};
use crate::policy::{Client, Principal};
use crate::serve::child_call::ChildCall;
use crate::trace_context::TraceContext;
use answer::{Request, respond};
use flight::{SendRefused, send};

pub async fn post(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    identity: Arc<Principal>,
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
    let backend = match crate::serve::pooled::backend(gateway, principal.clone()).await {
        Ok(backend) => backend,
        Err(unavailable) => return no_backend(&raw_id, unavailable),
    };
    let mut params = envelope::params_object(parsed.params).unwrap_or_default();
    let support = match call_checked(gateway, &backend, method, &params, lookup, &raw_id).await {
        Ok(support) => support,
        Err(refusal) => return refusal,
    };
    let filter = match police(gateway, &backend, &identity, method, &raw_id, &params).await {
        Verdict::Pass => None,
        Verdict::Filter(filter) => Some(filter),
        Verdict::Answer { line, rule } => {
            let line = answer_for_modern(method, &raw_id, &line).unwrap_or(line);
            let mut answer = json(StatusCode::OK, Bytes::from(line));
            answer.extensions_mut().insert(RefusedBy(rule));
            if let Some(member) = MemberLookup::new(gateway, &backend.session, method, &params) {
                member.mark(method, &mut answer);
            }
            return answer;
        }
    };
    if !backend.modern
        && let Some(answer) = answered_here(
            gateway,
            &backend,
            principal.as_deref(),
            &raw_id,
            method,
            &params,
        )
        .await
    {
        return answer;
    }
    let mut request = request_of(
        raw_id,
        method,
        &params,
        claim.log_level.is_some(),
        principal,
    );
    request.filter = filter;
    let planned = plan_call(gateway, &backend, &request, method, support);
    if let Planned::Refused(line, status) = planned {
        return json(status, Bytes::from(line));
    }
    request.as_task = matches!(planned, Planned::AsTask(_));
    if !backend.modern && mrtr::may_require_input(method) {
        if let Some(state) = params.get("requestState") {
            return resume(gateway, backend, request, &params, state).await;
        }
        // Answers to questions nobody asked: a handshake-era child would not know them.
        params.remove("inputResponses");
    }
    if !backend.modern {
        for_handshake_era(method, &mut params);
        if let Planned::AsTask(task) = planned {
            params.insert("task".into(), task);
        }
    }
    // A stdio server sees no HTTP headers: their trace context goes into `_meta` (one
    // already there wins).
    carry_trace(headers, &mut params);
    exchange(gateway, backend, request, method, params).await
}

/// A `tools/call`'s `Mcp-Param-*` headers checked against the tool (400 with -32020 when
/// they do not match), and whether the tool may run as a task.
async fn call_checked(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    method: &str,
    params: &Map<String, Value>,
    lookup: impl Fn(&str) -> Option<String>,
    raw_id: &str,
) -> Result<TaskSupport, Response<Body>> {
    if method != "tools/call" {
        return Ok(TaskSupport::Forbidden);
    }
    super::params::check(gateway, backend, params, lookup)
        .await
        .map_err(|mismatch| {
            tracing::debug!("{mismatch}");
            json_error(
                StatusCode::BAD_REQUEST,
                raw_id,
                crate::era::HEADER_MISMATCH,
                &mismatch,
            )
        })
}

/// `server/discover` for a handshake-era child, from its handshake: with the tasks
/// extension when it runs tools as tasks (the gateway translates them).
fn discover(backend: &Backend, raw_id: &str) -> Response<Body> {
    let mut result = discover_result(&backend.initialize);
    if tasks::child_runs_tool_tasks(backend) {
        crate::era::tasks::declare_extension(&mut result["capabilities"]);
    }
    let line = format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{result}}}"#);
    json(StatusCode::OK, Bytes::from(line))
}

/// What the gateway answers itself for a handshake-era child, which has no such method:
/// `server/discover`, a listen, and the tasks methods.
async fn answered_here(
    gateway: &Arc<Gateway>,
    backend: &Arc<Backend>,
    principal: Option<&str>,
    raw_id: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Option<Response<Body>> {
    if method == "server/discover" {
        return Some(discover(backend, raw_id));
    }
    if method == "subscriptions/listen" {
        return Some(super::listen::serve(gateway, backend, principal, raw_id, params).await);
    }
    if method.starts_with("tasks/") {
        return Some(tasks_method(gateway, backend, principal, raw_id, method, params).await);
    }
    None
}

/// A tasks method for a handshake-era child: answered from the tasks held for the client
/// when the child runs tools as tasks; otherwise no task id is one of ours (its tasks are
/// not offered), and the methods 2026-07-28 removed are unknown.
async fn tasks_method(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    principal: Option<&str>,
    raw_id: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Response<Body> {
    let line = if !matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel") {
        error_response(
            raw_id,
            METHOD_NOT_FOUND,
            &format!("Method not found: {method}"),
            None,
        )
    } else if tasks::child_runs_tool_tasks(backend) {
        tasks::answer(gateway, principal, raw_id, method, params).await
    } else {
        error_response(
            raw_id,
            INVALID_PARAMS,
            crate::era::tasks::UNKNOWN_TASK,
            None,
        )
    };
    let status = answer::status_for(&line);
    json(status, Bytes::from(line))
}

/// Whether a `tools/call` to a handshake-era child goes as a task (see `tasks::plan`).
fn plan_call(
    gateway: &Gateway,
    backend: &Backend,
    request: &Request,
    method: &str,
    support: TaskSupport,
) -> Planned {
    if method != "tools/call" || !tasks::child_runs_tool_tasks(backend) {
        return Planned::Plain;
    }
    tasks::plan(
        gateway,
        request.principal.as_deref(),
        &request.raw_id,
        &request.capabilities,
        support,
    )
}

/// A 2026-07-28 request's params made fit for a handshake-era child: the envelope out, and
/// a `task` parameter (which 2026-07-28 does not have; sent anyway, it would make the
/// child answer with a 2025-11-25 task the client cannot read).
fn for_handshake_era(method: &str, params: &mut Map<String, Value>) {
    envelope::strip(params);
    if method == "tools/call" {
        params.remove("task");
    }
}

/// Sends the request to the principal's backend and answers with what comes back; at an
/// aggregate endpoint the answer names, for the audit line, the member server it went to.
async fn exchange(
    gateway: &Arc<Gateway>,
    backend: Arc<Backend>,
    request: Request,
    method: &str,
    params: Map<String, Value>,
) -> Response<Body> {
    let member = MemberLookup::new(gateway, &backend.session, method, &params);
    let mut response = match send(gateway, &backend, method, params).await {
        Ok(flight) => respond(gateway, backend, request, flight).await,
        Err(refusal) => refusal.response(gateway, &request.raw_id),
    };
    if let Some(member) = member {
        member.mark(method, &mut response);
    }
    response
}

/// The policy's verdict on a request (its params copied only when a policy is in force).
async fn police(
    gateway: &Gateway,
    backend: &Backend,
    identity: &Arc<Principal>,
    method: &str,
    raw_id: &str,
    params: &Map<String, Value>,
) -> Verdict {
    if gateway.config.policing.is_none() {
        return Verdict::Pass;
    }
    let info = params.get("_meta").and_then(|m| m.get(META_CLIENT_INFO));
    let text = |key: &str| {
        info.and_then(|i| i.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let client = Client {
        name: text("name"),
        version: text("version"),
        era: crate::era::MODERN_VERSION.into(),
    };
    let params = Value::Object(params.clone());
    let asked = Asked {
        session: &backend.session,
        identity,
        client: &client,
        method,
        raw_id,
        params: Some(&params),
        modern_child: backend.modern,
    };
    gateway.police(asked).await
}

/// The answer when the principal's backend is not available.
fn no_backend(raw_id: &str, unavailable: Unavailable) -> Response<Body> {
    match unavailable {
        Unavailable::Refused(Refused::Full(max)) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            raw_id,
            INTERNAL_ERROR,
            &format!(
                "Service Unavailable: --max-sessions ({max}) children are running; try again later"
            ),
        ),
        Unavailable::Refused(Refused::PrincipalFull(max)) => json_error(
            StatusCode::TOO_MANY_REQUESTS,
            raw_id,
            INTERNAL_ERROR,
            &format!(
                "Too Many Requests: you hold --max-sessions-per-principal ({max}) sessions; end one of your sessions and retry"
            ),
        ),
        Unavailable::Refused(Refused::Spawn(why)) | Unavailable::Handshake(why) => {
            tracing::error!("{why}");
            json_error(
                StatusCode::BAD_GATEWAY,
                raw_id,
                INTERNAL_ERROR,
                "the MCP server could not be started",
            )
        }
    }
}

/// What the answer path needs of the request.
fn request_of(
    raw_id: String,
    method: &str,
    params: &Map<String, Value>,
    logs: bool,
    principal: Option<String>,
) -> Request {
    Request {
        raw_id,
        method: method.to_owned(),
        name: name_of(method, params),
        logs,
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
        filter: None,
        as_task: false,
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
    let same_child = |flight: &ChildCall| {
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
    let session = &backend.session;
    session.backend.set_asking(&flight.guard.key, false);
    if let Err(undeliverable) = session
        .backend
        .send(Bytes::from(answer), gateway.config.response_timeout)
        .await
    {
        return SendRefused::Undeliverable(undeliverable).response(gateway, &request.raw_id);
    }
    respond(gateway, backend, request, flight).await
}

/// The trace context for the server: the headers' (a `_meta` one wins), or, with
/// OpenTelemetry on, this gateway's span as the server's parent.
fn carry_trace(headers: &HeaderMap, params: &mut Map<String, Value>) {
    let from_headers =
        TraceContext::from_headers(|name| crate::serve::responses::header(headers, name));
    match crate::telemetry::outgoing(from_headers.as_ref()) {
        Some(ours) => ours.over_meta(params),
        None => {
            if let Some(trace) = from_headers {
                trace.into_meta(params);
            }
        }
    }
}
