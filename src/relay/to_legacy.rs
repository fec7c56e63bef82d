//! A 2026-07-28 host in front of a legacy server. The relay runs the handshake upstream with
//! the host's declared capabilities, answers `server/discover` from it, strips the envelope
//! from requests, gives results the fields a modern host requires, and serves
//! `subscriptions/listen` itself from the session's notifications.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{OnceCell, mpsc};

use super::Relay;
use super::call::{Aside, Outgoing, call};
use super::exchange::Call;
use super::gate::Failure;
use super::methods::is_replay_safe;
use super::passthrough::host_claim;
use super::upstream::Wire;
use crate::era::bridge::{decorate_result, discover_result, error_code_for_modern};
use crate::era::envelope::{self, Claim, request_line};
use crate::era::{self, LATEST_LEGACY_VERSION, META_SUBSCRIPTION_ID};
use crate::jsonrpc::error::{INTERNAL_ERROR, METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message::{self, IdKey, Kind, Message};

/// One `subscriptions/listen` of the host, served by the relay.
struct Subscription {
    raw_id: String,
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

#[derive(Default)]
pub struct ModernHost {
    /// The server's `initialize` result, once the handshake is done.
    session: OnceCell<Value>,
    subscriptions: Mutex<HashMap<IdKey, Subscription>>,
    /// Host id → the upstream id its request was sent under, for cancellation.
    upstream_ids: Mutex<HashMap<IdKey, String>>,
    log_level_sent: tokio::sync::Mutex<Option<String>>,
}

impl ModernHost {
    /// The upstream id a host request was sent under, if it is in flight.
    pub fn upstream_id_of(&self, host_id: &IdKey) -> Option<String> {
        self.upstream_ids
            .lock()
            .expect("ids lock")
            .get(host_id)
            .cloned()
    }

    /// The lines a notification from the server becomes for the host's subscriptions:
    /// one per matching subscription, tagged with its id.
    fn for_subscriptions(&self, method: &str, params: Option<&Value>) -> Vec<Vec<u8>> {
        let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str);
        let subscriptions = self.subscriptions.lock().expect("subscriptions lock");
        subscriptions
            .values()
            .filter(|s| match method {
                "notifications/tools/list_changed" => s.tools,
                "notifications/prompts/list_changed" => s.prompts,
                "notifications/resources/list_changed" => s.resources,
                "notifications/resources/updated" => {
                    uri.is_some_and(|uri| s.uris.iter().any(|u| uri.starts_with(u.as_str())))
                }
                _ => false,
            })
            .map(|s| {
                let mut params = params.cloned().unwrap_or_else(|| json!({}));
                if !params.is_object() {
                    params = json!({});
                }
                let subscription_id: Value = serde_json::from_str(&s.raw_id).unwrap_or(Value::Null);
                params["_meta"] = json!({ META_SUBSCRIPTION_ID: subscription_id });
                serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
                    .expect("JSON serializes")
            })
            .collect()
    }
}

/// Serves one request of a modern host against a legacy server.
pub async fn serve(relay: Arc<Relay>, request: Call) {
    if let Err(failure) = answer(&relay, &request).await {
        relay.gate.fail(&request.id, &failure).await;
    }
}

async fn answer(relay: &Arc<Relay>, request: &Call) -> Result<(), Failure> {
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
    let initialize = ensure_session(relay, &claim).await?;
    match request.method.as_str() {
        "server/discover" => {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
                request.raw_id,
                discover_result(initialize)
            );
            relay.gate.deliver(&request.id, line.into_bytes()).await;
            Ok(())
        }
        "subscriptions/listen" => listen(relay, request, parsed.params, initialize).await,
        _ => forward(relay, request, parsed.params, &claim, initialize).await,
    }
}

/// The handshake, once per process, with the first request's capabilities and client
/// info (the server learns nothing it was not told by the host).
async fn ensure_session<'a>(relay: &'a Arc<Relay>, claim: &Claim) -> Result<&'a Value, Failure> {
    relay
        .modern_host
        .session
        .get_or_try_init(|| async {
            let params = json!({
                "protocolVersion": LATEST_LEGACY_VERSION,
                "capabilities": claim.capabilities,
                "clientInfo": claim.client_info.clone().unwrap_or_else(era::relay_info),
            })
            .to_string();
            relay
                .upstream
                .remember_host_initialize(RawValue::from_string(params.clone()).ok().as_deref());
            let answer = relay
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
                    relay.divert_server_messages();
                    relay.restart_server_stream();
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
    relay: &Relay,
    request: &Call,
    params: Option<&RawValue>,
    claim: &Claim,
    initialize: &Value,
) -> Result<(), Failure> {
    let method = request.method.as_str();
    let mut params = envelope::params_object(params).unwrap_or_default();
    envelope::strip(&mut params);
    if let Some(level) = &claim.log_level
        && initialize.pointer("/capabilities/logging").is_some()
    {
        set_log_level(relay, level).await;
    }
    let id = relay.next_upstream_id("call");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    relay
        .modern_host
        .upstream_ids
        .lock()
        .expect("ids lock")
        .insert(request.id.clone(), raw_id.clone());
    let _in_flight = InFlight {
        host: &relay.modern_host,
        id: request.id.clone(),
    };
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, method, &params)),
        id: &IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Legacy { initialize: false },
        replay_safe: is_replay_safe(method),
    };
    let log_level = claim.log_level.clone();
    let host = &relay.modern_host;
    let out = relay.gate.outbox().clone();
    let answer = call(relay, outgoing, &mut |message, payload| {
        on_the_way(host, &out, message, payload, log_level.as_deref())
    })
    .await?;
    let line = modern_answer(method, &request.raw_id, &answer)?;
    relay.gate.deliver(&request.id, line).await;
    Ok(())
}

/// Sends `logging/setLevel` upstream when a request asks for a level not yet set, so the
/// server emits what the host wants; what reaches the host is still filtered per request.
async fn set_log_level(relay: &Relay, level: &str) {
    let mut sent = relay.modern_host.log_level_sent.lock().await;
    if sent.as_deref() == Some(level) {
        return;
    }
    let id = relay.next_upstream_id("loglevel");
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
    match call(relay, outgoing, &mut |_, _| Aside::Ignore).await {
        Ok(_) => *sent = Some(level.to_owned()),
        Err(failure) => tracing::debug!(problem = %failure.message, "logging/setLevel failed"),
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
fn on_the_way(
    host: &ModernHost,
    out: &crate::jsonrpc::writer::Outbox,
    message: &Message<'_>,
    payload: &[u8],
    log_level: Option<&str>,
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

fn send_to_subscriptions(
    host: &ModernHost,
    out: &crate::jsonrpc::writer::Outbox,
    method: &str,
    params: Option<&RawValue>,
) {
    let params = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
    let lines = host.for_subscriptions(method, params.as_ref());
    if lines.is_empty() {
        tracing::debug!(%method, "dropped a server notification no subscription asked for");
        return;
    }
    let out = out.clone();
    tokio::spawn(async move {
        for line in lines {
            out.send(line).await;
        }
    });
}

/// A legacy answer as a modern host must see it: under the host's id, results with
/// `resultType` (and cache hints), error codes the modern era allows.
fn modern_answer(method: &str, host_raw_id: &str, answer: &[u8]) -> Result<Vec<u8>, Failure> {
    let mut answer: Value = serde_json::from_slice(answer)
        .map_err(|_| Failure::upstream("the upstream's answer is not valid JSON-RPC"))?;
    let id: Value = serde_json::from_str(host_raw_id).unwrap_or(Value::Null);
    answer["id"] = id;
    if let Some(result) = answer.get_mut("result") {
        decorate_result(method, result);
    } else if let Some(code) = answer.pointer("/error/code").and_then(Value::as_i64) {
        answer["error"]["code"] = error_code_for_modern(code).into();
    }
    Ok(serde_json::to_vec(&answer).expect("JSON serializes"))
}

/// Removes a subscription when its request ends (cancelled by the host, or shutdown).
struct Subscribed<'a> {
    host: &'a ModernHost,
    id: IdKey,
}

impl Drop for Subscribed<'_> {
    fn drop(&mut self) {
        self.host
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .remove(&self.id);
    }
}

/// Serves the host's `subscriptions/listen` from the session's own notifications: the
/// acknowledgement lists what this server can deliver, then the stream stays open until
/// the host cancels it or the relay shuts down.
async fn listen(
    relay: &Arc<Relay>,
    request: &Call,
    params: Option<&RawValue>,
    initialize: &Value,
) -> Result<(), Failure> {
    let params: Value = params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_default();
    let asked = params.get("notifications").cloned().unwrap_or_default();
    let caps = initialize.get("capabilities").cloned().unwrap_or_default();
    let flag = |key: &str, family: &str, capability: &str| {
        asked.get(key).and_then(Value::as_bool).unwrap_or(false)
            && caps
                .get(family)
                .and_then(|f| f.get(capability))
                .and_then(Value::as_bool)
                .unwrap_or(false)
    };
    let mut uris = Vec::new();
    if caps
        .pointer("/resources/subscribe")
        .and_then(Value::as_bool)
        == Some(true)
    {
        for uri in asked
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if subscribe_upstream(relay, "resources/subscribe", uri).await {
                uris.push(uri.to_owned());
            }
        }
    }
    let subscription = Subscription {
        raw_id: request.raw_id.clone(),
        tools: flag("toolsListChanged", "tools", "listChanged"),
        prompts: flag("promptsListChanged", "prompts", "listChanged"),
        resources: flag("resourcesListChanged", "resources", "listChanged"),
        uris: uris.clone(),
    };
    let mut honoured = serde_json::Map::new();
    for (key, on) in [
        ("toolsListChanged", subscription.tools),
        ("promptsListChanged", subscription.prompts),
        ("resourcesListChanged", subscription.resources),
    ] {
        if on {
            honoured.insert(key.into(), true.into());
        }
    }
    if !uris.is_empty() {
        honoured.insert("resourceSubscriptions".into(), json!(uris));
    }
    let subscription_id: Value = serde_json::from_str(&request.raw_id).unwrap_or(Value::Null);
    relay
        .modern_host
        .subscriptions
        .lock()
        .expect("subscriptions lock")
        .insert(request.id.clone(), subscription);
    let _subscribed = Subscribed {
        host: &relay.modern_host,
        id: request.id.clone(),
    };
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {META_SUBSCRIPTION_ID: subscription_id}, "notifications": honoured}});
    relay
        .gate
        .outbox()
        .send(serde_json::to_vec(&ack).expect("JSON serializes"))
        .await;
    relay.closing.cancelled().await;
    for uri in &uris {
        subscribe_upstream(relay, "resources/unsubscribe", uri).await;
    }
    let end = json!({"jsonrpc": "2.0", "id": subscription_id,
        "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: subscription_id}}});
    relay
        .gate
        .deliver(
            &request.id,
            serde_json::to_vec(&end).expect("JSON serializes"),
        )
        .await;
    Ok(())
}

async fn subscribe_upstream(relay: &Relay, method: &str, uri: &str) -> bool {
    let id = relay.next_upstream_id("subscribe");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let mut params = serde_json::Map::new();
    params.insert("uri".into(), uri.into());
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, method, &params)),
        id: &IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Legacy { initialize: false },
        replay_safe: true,
    };
    match call(relay, outgoing, &mut |_, _| Aside::Ignore).await {
        Ok(answer) => crate::relay::passthrough::error_code(&answer).is_none(),
        Err(failure) => {
            tracing::debug!(problem = %failure.message, %method, "a subscription request failed");
            false
        }
    }
}

/// Handles what the session's standalone stream carries for a modern host: notifications
/// go to matching subscriptions, the server's pings are answered, and its other requests
/// are refused (a modern host cannot be asked anything outside a call).
pub async fn serve_server_messages(relay: Arc<Relay>, mut inbound: mpsc::Receiver<Vec<u8>>) {
    let out = relay.gate.outbox().clone();
    while let Some(payload) = inbound.recv().await {
        let Ok(message) = message::parse(&payload) else {
            continue;
        };
        let method = message.method.as_deref().unwrap_or_default();
        match message.kind {
            Kind::Notification => {
                send_to_subscriptions(&relay.modern_host, &out, method, message.params)
            }
            Kind::Request => {
                let raw_id = message.id.map(|id| id.get()).unwrap_or("null");
                let answer = if method == "ping" {
                    format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{{}}}}"#).into_bytes()
                } else {
                    let why = format!(
                        "the host speaks protocol 2026-07-28 and cannot receive {method} outside a call"
                    );
                    error_response(raw_id, METHOD_NOT_FOUND, &why, None)
                };
                super::lane::deliver(&relay, Bytes::from(answer)).await;
            }
            Kind::Response => {}
        }
    }
}
