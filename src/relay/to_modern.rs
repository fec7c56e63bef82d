//! A legacy host in front of a 2026-07-28 server. The relay answers the handshake itself
//! (from `server/discover`), stamps the host's capabilities onto every request, answers
//! `ping` and `logging/setLevel` locally, carries subscriptions on `subscriptions/listen`,
//! and turns `input_required` results into real requests to the host, then retries.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::Relay;
use super::call::{Aside, Outgoing, call};
use super::detect::{UpstreamEra, modern_headers};
use super::exchange::Call;
use super::gate::Failure;
use super::listen::Listens;
use super::methods::is_replay_safe;
use super::passthrough::error_code;
use super::tool_headers::{Arguments, add_param_headers, envelope_only, refresh};
use super::upstream::Wire;
use crate::era::bridge::{capabilities_for_modern, initialize_result};
use crate::era::envelope::{self, Stamp, request_line};
use crate::era::mrtr::{self, InputRequest};
use crate::era::{self, HEADER_MISMATCH};
use crate::jsonrpc::error::{INVALID_PARAMS, with_error_object};
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message;

/// What the legacy host declared in its `initialize`, and what it set since.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Its capabilities as a modern request declares them (never wider).
    pub capabilities: Value,
    pub client_info: Option<Value>,
    /// From `logging/setLevel`, sent as `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<String>,
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            capabilities: json!({}),
            client_info: None,
            log_level: None,
        }
    }
}

impl Profile {
    pub fn stamp(&self, version: &str) -> Stamp {
        Stamp {
            version: version.to_owned(),
            capabilities: self.capabilities.clone(),
            client_info: self.client_info.clone().unwrap_or_else(era::relay_info),
            log_level: self.log_level.clone(),
        }
    }
}

#[derive(Default)]
pub struct LegacyHost {
    profile: Mutex<Profile>,
    pub listens: Listens,
}

impl LegacyHost {
    pub fn profile(&self) -> Profile {
        self.profile.lock().expect("profile lock").clone()
    }

    /// Keeps what the host declared in `initialize`, whichever path answers it (the
    /// upstream's era may change later, and every translated request needs it).
    pub fn remember_initialize(&self, params: Option<&RawValue>) {
        let params: InitializeParams = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let mut profile = self.profile.lock().expect("profile lock");
        profile.capabilities = capabilities_for_modern(&params.capabilities);
        profile.client_info = params.client_info.filter(Value::is_object);
    }
}

/// Serves one legacy request against a modern server speaking `version`.
pub async fn serve(relay: Arc<Relay>, request: Call, version: String, discover: Option<Value>) {
    if let Err(failure) = answer(&relay, &request, &version, discover).await {
        relay.gate.fail(&request.id, &failure).await;
    }
}

async fn answer(
    relay: &Arc<Relay>,
    request: &Call,
    version: &str,
    discover: Option<Value>,
) -> Result<(), Failure> {
    let parsed =
        message::parse(&request.line).map_err(|_| Failure::upstream("unparsable request"))?;
    let host = &relay.legacy_host;
    match request.method.as_str() {
        "initialize" => {
            let params: InitializeParams = parsed
                .params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or_default();
            let discover = match discover {
                Some(discover) => Some(discover),
                None => fetch_discover(relay, version).await,
            };
            let result = initialize_result(discover.as_ref(), params.protocol_version.as_deref());
            tracing::info!(
                protocol_version = %result["protocolVersion"],
                "answered the host's initialize from the 2026-07-28 server's server/discover"
            );
            deliver(relay, request, &result).await;
        }
        "ping" => deliver(relay, request, &json!({})).await,
        "logging/setLevel" => {
            let level = parsed
                .params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|p| p.get("level").and_then(Value::as_str).map(str::to_owned))
                .ok_or_else(|| invalid_params("logging/setLevel needs params.level"))?;
            host.profile.lock().expect("profile lock").log_level = Some(level);
            deliver(relay, request, &json!({})).await;
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            let uri = parsed
                .params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned))
                .ok_or_else(|| invalid_params("params.uri is required"))?;
            if request.method == "resources/subscribe" {
                host.listens.subscribe(relay, version, uri);
            } else {
                host.listens.unsubscribe(&uri);
            }
            deliver(relay, request, &json!({})).await;
        }
        _ => forward(relay, request, version, parsed.params).await?,
    }
    Ok(())
}

#[derive(Deserialize, Default)]
struct InitializeParams {
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
    #[serde(default)]
    capabilities: Value,
    #[serde(rename = "clientInfo")]
    client_info: Option<Value>,
}

/// The server's DiscoverResult, asked with the host's envelope (the probe did not get one).
async fn fetch_discover(relay: &Relay, version: &str) -> Option<Value> {
    let mut params = Map::new();
    envelope::stamp(&mut params, &relay.legacy_host.profile().stamp(version));
    let answer = own_request(relay, version, "server/discover", &params)
        .await
        .ok()?;
    let result = serde_json::from_slice::<Value>(&answer)
        .ok()?
        .get("result")?
        .clone();
    relay.eras.set_upstream(UpstreamEra::Modern {
        version: version.to_owned(),
        discover: Some(result.clone()),
    });
    Some(result)
}

/// A request of the relay's own to the modern server; returns the answer line.
pub async fn own_request(
    relay: &Relay,
    version: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Vec<u8>, Failure> {
    let id = relay.next_upstream_id("own");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let headers = modern_headers(version, method, Some(params))?;
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, method, params)),
        id: &crate::jsonrpc::message::IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Modern {
            headers: &headers,
            long_lived: false,
        },
        replay_safe: true,
    };
    call(relay, outgoing, &mut |_, _| Aside::Ignore).await
}

#[derive(Deserialize)]
struct Reply {
    result: Option<Box<RawValue>>,
    error: Option<Box<RawValue>>,
}

/// Sends a host request upstream with the envelope, running as many input rounds as the
/// server needs (up to `--max-input-rounds`).
async fn forward(
    relay: &Relay,
    request: &Call,
    version: &str,
    params: Option<&RawValue>,
) -> Result<(), Failure> {
    let method = request.method.as_str();
    let mut params = envelope::params_object(params)
        .ok_or_else(|| invalid_params("params must be an object"))?;
    let profile = relay.legacy_host.profile();
    envelope::stamp(&mut params, &profile.stamp(version));
    let original = params;
    let mut body_params = serde_json::to_string(&original).expect("a JSON map serializes");
    let max_rounds = relay.config.max_input_rounds;
    let mut rounds = 0;
    let mut relisted = false;
    loop {
        let id = relay.next_upstream_id("call");
        let raw_id = serde_json::to_string(&id).expect("a string serializes");
        let mut headers = modern_headers(version, method, Some(&original))?;
        if method == "tools/call" {
            add_param_headers(
                relay,
                version,
                original.get("name").and_then(Value::as_str),
                Arguments::Parsed(original.get("arguments")),
                || envelope_only(Some(&original)),
                &mut headers,
            )
            .await?;
        }
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"method":{},"params":{body_params}}}"#,
            serde_json::to_string(method).expect("a string serializes")
        );
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
        let answer = call(relay, outgoing, &mut |_, payload| {
            Aside::Host(one_line(payload).into_owned())
        })
        .await?;
        let reply: Reply = serde_json::from_slice(&answer)
            .map_err(|_| Failure::upstream("the upstream's answer is not valid JSON-RPC"))?;
        if let Some(error) = reply.error {
            if method == "tools/call" && !relisted && error_code(&answer) == Some(HEADER_MISMATCH) {
                relisted = true;
                refresh(relay, version, &envelope_only(Some(&original))).await?;
                continue;
            }
            relay
                .gate
                .deliver(&request.id, with_error_object(&request.raw_id, &error))
                .await;
            return Ok(());
        }
        let result = reply
            .result
            .unwrap_or_else(|| RawValue::from_string("{}".into()).expect("valid JSON"));
        if mrtr::may_require_input(method)
            && mrtr::result_type(&result).as_deref() == Some("input_required")
        {
            if rounds >= max_rounds {
                return give_up(relay, request, &format!(
                    "the server still needed input after {max_rounds} rounds (--max-input-rounds); the call was abandoned"
                )).await;
            }
            rounds += 1;
            let input = match mrtr::read(&result) {
                Ok(input) => input,
                Err(why) => return give_up(relay, request, &why).await,
            };
            let responses = match ask_host(relay, &profile.capabilities, &input.requests).await {
                Ok(responses) => responses,
                Err(why) => return give_up(relay, request, &why).await,
            };
            body_params = mrtr::retry_params(&original, responses, input.request_state.as_deref());
            continue;
        }
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
            request.raw_id,
            result.get()
        )
        .into_bytes();
        let line = if method == "tools/list" {
            relay.tools.filter_answer(line)
        } else {
            line
        };
        relay.gate.deliver(&request.id, line).await;
        return Ok(());
    }
}

/// Puts each embedded request to the host as a real request, all at once, and collects the
/// answers under the server's keys.
async fn ask_host(
    relay: &Relay,
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
    let out = relay.gate.outbox();
    let timeout = relay.config.input_timeout;
    let asks = requests.iter().map(|request| {
        let mut params = request.params.clone();
        // 2025-11-25 hosts expect an elicitationId on URL-mode elicitations.
        if request.method == "elicitation/create"
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && params.get("elicitationId").is_none()
        {
            params["elicitationId"] = relay.next_upstream_id("elicitation").into();
        }
        async move {
            let answer = relay
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
async fn give_up(relay: &Relay, request: &Call, why: &str) -> Result<(), Failure> {
    tracing::info!(id = %request.id, reason = %why, "a multi-round call could not be completed");
    if request.method == "tools/call" {
        deliver(relay, request, &mrtr::tool_error_result(why)).await;
        return Ok(());
    }
    Err(Failure::upstream(why))
}

async fn deliver(relay: &Relay, request: &Call, result: &Value) {
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
        request.raw_id,
        serde_json::to_string(result).expect("JSON serializes")
    );
    relay.gate.deliver(&request.id, line.into_bytes()).await;
}

fn invalid_params(message: &str) -> Failure {
    Failure {
        code: INVALID_PARAMS,
        message: format!("Invalid params: {message}"),
        data: None,
    }
}
