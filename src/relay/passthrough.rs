//! A 2026-07-28 host in front of a 2026-07-28 server: the host's bytes go through unchanged,
//! with the headers the HTTP transport requires mirrored from them. No session, no GET, no
//! DELETE; cancelling a request closes its stream.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Relay;
use super::call::{Aside, Outgoing, call};
use super::detect::modern_headers;
use super::exchange::Call;
use super::gate::Failure;
use super::methods::is_replay_safe;
use super::tool_headers::{add_param_headers, envelope_only, refresh};
use super::upstream::Wire;
use crate::era::envelope::{self, Claim, ClaimError};
use crate::era::{HEADER_MISMATCH, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION};
use crate::jsonrpc::error::INVALID_PARAMS;
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message;

/// Serves one request of a modern host against a modern server.
pub async fn serve(relay: Arc<Relay>, call: Call) {
    if let Err(failure) = relay_request(&relay, &call).await {
        relay.gate.fail(&call.id, &failure).await;
    }
}

/// The host's envelope, or the error a 2026-07-28 server answers when it is unusable.
pub fn host_claim(params: Option<&serde_json::value::RawValue>) -> Result<Claim, Failure> {
    match envelope::read_claim(params) {
        Ok(Some(claim)) => Ok(claim),
        Ok(None) => Err(Failure {
            code: INVALID_PARAMS,
            message: "Invalid params: a 2026-07-28 request needs params._meta with io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities".into(),
            data: None,
        }),
        Err(ClaimError::Malformed(why)) => Err(Failure {
            code: INVALID_PARAMS,
            message: format!("Invalid params: {why}"),
            data: None,
        }),
        Err(ClaimError::Unsupported { requested }) => Err(Failure {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": MODERN_VERSIONS, "requested": requested})),
        }),
    }
}

async fn relay_request(relay: &Relay, request: &Call) -> Result<(), Failure> {
    let parsed =
        message::parse(&request.line).map_err(|_| Failure::upstream("unparsable request"))?;
    let claim = host_claim(parsed.params)?;
    let params = envelope::params_object(parsed.params);
    let method = request.method.as_str();
    let mut relisted = false;
    loop {
        let mut headers = modern_headers(&claim.version, method, params.as_ref())?;
        if method == "tools/call" {
            add_param_headers(relay, &claim.version, params.as_ref(), &mut headers).await?;
        }
        let outgoing = Outgoing {
            body: request.line.clone(),
            id: &request.id,
            raw_id: &request.raw_id,
            wire: Wire::Modern {
                headers: &headers,
                long_lived: method == "subscriptions/listen",
            },
            replay_safe: is_replay_safe(method),
        };
        let answer = call(relay, outgoing, &mut |_, payload| {
            Aside::Host(one_line(payload).into_owned())
        })
        .await?;
        // The server says a mirrored header disagrees with the body: the tool's schema
        // may have changed since it was listed. List again, and retry once.
        if method == "tools/call" && !relisted && error_code(&answer) == Some(HEADER_MISMATCH) {
            relisted = true;
            tracing::info!(
                "the server answered -32020 to a tools/call; listing the tools again and retrying"
            );
            refresh(relay, &claim.version, &envelope_only(params.as_ref())).await?;
            continue;
        }
        let answer = if method == "tools/list" {
            relay.tools.filter_answer(answer)
        } else {
            answer
        };
        relay
            .gate
            .deliver(&request.id, complete_for_modern_host(method, answer))
            .await;
        return Ok(());
    }
}

/// An answer as a modern host must get it: every result with `resultType` (a server that
/// leaves it out means "complete"), and complete results of cacheable methods with
/// `ttlMs` and `cacheScope`. The line is returned byte for byte when nothing is missing.
pub fn complete_for_modern_host(method: &str, answer: Vec<u8>) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Present {
        #[serde(rename = "resultType")]
        result_type: Option<serde::de::IgnoredAny>,
        #[serde(rename = "ttlMs")]
        ttl_ms: Option<serde::de::IgnoredAny>,
        #[serde(rename = "cacheScope")]
        cache_scope: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<Present>,
    }
    let Ok(Answer {
        result: Some(present),
    }) = serde_json::from_slice::<Answer>(&answer)
    else {
        return answer;
    };
    let cacheable = crate::era::bridge::is_cacheable(method);
    let missing = present.result_type.is_none()
        || (cacheable && (present.ttl_ms.is_none() || present.cache_scope.is_none()));
    if !missing {
        return answer;
    }
    let Ok(mut answer_value) = serde_json::from_slice::<Value>(&answer) else {
        return answer;
    };
    let Some(result) = answer_value.get_mut("result") else {
        return answer;
    };
    let input_required = result.get("resultType").and_then(Value::as_str) == Some("input_required");
    if input_required {
        return answer; // interim results carry no cache hints
    }
    crate::era::bridge::decorate_result(method, result);
    serde_json::to_vec(&answer_value).unwrap_or(answer)
}

/// The error code of an answer line, if it is an error.
pub fn error_code(answer: &[u8]) -> Option<i64> {
    let answer: Value = serde_json::from_slice(answer).ok()?;
    answer.get("error")?.get("code")?.as_i64()
}
