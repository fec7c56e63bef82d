//! A 2026-07-28 host in front of a 2026-07-28 server: the host's bytes go through unchanged,
//! with the headers the HTTP transport requires mirrored from them. No session, no GET, no
//! DELETE; cancelling a request closes its stream.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::value::RawValue;

use serde_json::{Value, json};

use super::tool_args::{add_param_headers, envelope_only, refresh};
use crate::era::bridge::modern_code_for_modern_host;
use crate::era::envelope::{self, Claim, ClaimError};
use crate::era::{HEADER_MISMATCH, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION};
use crate::jsonrpc::error::INVALID_PARAMS;
use crate::jsonrpc::framing::one_line;
use crate::jsonrpc::message;
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::context::Ctx;
use crate::relay::detect::modern_headers_named;
use crate::relay::gate::Failure;
use crate::relay::link::session::Wire;
use crate::relay::methods::is_replay_safe;
use crate::relay::request::Call;

/// Serves one request of a modern host against a modern server.
pub async fn serve(ctx: Arc<Ctx>, call: Call) {
    if let Err(failure) = relay_request(&ctx, &call).await {
        ctx.gate.fail(&call.id, &failure).await;
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

/// The fields of a modern request's params the relay needs, borrowed (the request itself
/// is forwarded as the host's bytes).
#[derive(serde::Deserialize)]
struct View<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(rename = "taskId", borrow, default)]
    task_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<MetaView<'a>>,
}

#[derive(serde::Deserialize)]
struct MetaView<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    capabilities: Option<&'a RawValue>,
}

/// The version a well-formed modern request claims, read without building a tree; `None`
/// sends the request down the slow path that names exactly what is wrong.
fn quick_claim<'a>(view: &'a View<'_>) -> Option<&'a str> {
    let meta = view.meta.as_ref()?;
    let version = meta.version.as_deref()?;
    let capabilities_ok = meta
        .capabilities
        .is_some_and(|c| c.get().trim_start().starts_with('{'));
    (capabilities_ok && MODERN_VERSIONS.contains(&version)).then_some(version)
}

async fn relay_request(ctx: &Ctx, request: &Call) -> Result<(), Failure> {
    let parsed =
        message::parse(&request.line).map_err(|_| Failure::upstream("unparsable request"))?;
    let view: Option<View<'_>> = match parsed.params {
        Some(params) => serde_json::from_str(params.get()).ok(),
        None => None,
    };
    let version = match view.as_ref().and_then(quick_claim) {
        Some(version) => version.to_owned(),
        None => host_claim(parsed.params)?.version,
    };
    let method = request.method.as_str();
    let name = match method {
        "resources/read" => view.as_ref().and_then(|v| v.uri.as_deref()),
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            view.as_ref().and_then(|v| v.task_id.as_deref())
        }
        _ => view.as_ref().and_then(|v| v.name.as_deref()),
    };
    let mut relisted = false;
    loop {
        let mut headers = modern_headers_named(&version, method, name)?;
        if method == "tools/call" {
            add_param_headers(
                ctx,
                &version,
                name,
                view.as_ref().and_then(|v| v.arguments),
                || envelope_only(envelope::params_object(parsed.params).as_ref()),
                &mut headers,
            )
            .await?;
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
        let answer = call(ctx, outgoing, &mut |_, payload| {
            Aside::Host(one_line(payload).into_owned())
        })
        .await?;
        let shape = AnswerShape::of(&answer);
        // The server says a mirrored header disagrees with the body: the tool's schema
        // may have changed since it was listed. List again, and retry once.
        if method == "tools/call" && !relisted && shape.error_code == Some(HEADER_MISMATCH) {
            relisted = true;
            tracing::info!(
                "the server answered -32020 to a tools/call; listing the tools again and retrying"
            );
            let meta = envelope_only(envelope::params_object(parsed.params).as_ref());
            refresh(ctx, &version, &meta).await?;
            continue;
        }
        let answer = if method == "tools/list" {
            ctx.tools.filter_answer(answer)
        } else {
            answer
        };
        let answer = if shape.complete_for(method) {
            answer
        } else {
            complete_for_modern_host(method, answer)
        };
        let answer = match shape.error_code {
            Some(code) if modern_code_for_modern_host(code) != code => {
                with_error_code(answer, modern_code_for_modern_host(code))
            }
            _ => answer,
        };
        ctx.gate.deliver(&request.id, answer).await;
        return Ok(());
    }
}

/// What the relay needs to know of an answer, read in one pass without building a tree.
#[derive(Default)]
pub struct AnswerShape {
    pub error_code: Option<i64>,
    result_type: bool,
    cache_hints: bool,
    is_result: bool,
}

impl AnswerShape {
    pub fn of(answer: &[u8]) -> Self {
        use serde::de::IgnoredAny;
        #[derive(serde::Deserialize)]
        struct Present {
            #[serde(rename = "resultType")]
            result_type: Option<IgnoredAny>,
            #[serde(rename = "ttlMs")]
            ttl_ms: Option<IgnoredAny>,
            #[serde(rename = "cacheScope")]
            cache_scope: Option<IgnoredAny>,
        }
        #[derive(serde::Deserialize)]
        struct Code {
            code: Option<i64>,
        }
        #[derive(serde::Deserialize)]
        struct Answer {
            result: Option<Present>,
            error: Option<Code>,
        }
        match serde_json::from_slice::<Answer>(answer) {
            Ok(Answer { result, error }) => Self {
                error_code: error.and_then(|e| e.code),
                is_result: result.is_some(),
                result_type: result.as_ref().is_some_and(|r| r.result_type.is_some()),
                cache_hints: result
                    .as_ref()
                    .is_some_and(|r| r.ttl_ms.is_some() && r.cache_scope.is_some()),
            },
            Err(_) => Self::default(),
        }
    }

    /// True when nothing needs adding for a modern host (errors never do).
    fn complete_for(&self, method: &str) -> bool {
        !self.is_result
            || (self.result_type && (self.cache_hints || !crate::era::bridge::is_cacheable(method)))
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

/// The answer with its error code replaced (the rest as it was).
fn with_error_code(answer: Vec<u8>, code: i64) -> Vec<u8> {
    let Ok(mut value) = serde_json::from_slice::<Value>(&answer) else {
        return answer;
    };
    value["error"]["code"] = code.into();
    serde_json::to_vec(&value).unwrap_or(answer)
}
