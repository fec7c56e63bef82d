//! Multi round-trip requests (§4.10): reading an `input_required` result, checking what the
//! host may be asked, and building the retry with `inputResponses` and `requestState`.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// Only these methods may answer `input_required`.
pub fn may_require_input(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// One embedded request, to be put to the host as a real request.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    pub key: String,
    pub method: String,
    pub params: Value,
}

/// An `input_required` result.
#[derive(Debug)]
pub struct InputRequired {
    pub requests: Vec<InputRequest>,
    /// The opaque state exactly as the server wrote it (a JSON string token).
    pub request_state: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Shape {
    #[serde(rename = "inputRequests", default)]
    input_requests: Option<Map<String, Value>>,
    #[serde(rename = "requestState", default)]
    request_state: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct TypeOnly<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<std::borrow::Cow<'a, str>>,
}

/// The result's `resultType` (absent means `complete`), from the result's JSON text.
pub fn result_type(result: &str) -> Option<String> {
    serde_json::from_str::<TypeOnly<'_>>(result)
        .ok()
        .and_then(|s| s.result_type)
        .map(std::borrow::Cow::into_owned)
}

/// Whether a result (its JSON text) is `input_required`. Nearly none is, so the text is
/// searched before anything is parsed.
pub fn requires_input(result: &str) -> bool {
    (result.contains("input_required") || result.contains("\\u"))
        && result_type(result).as_deref() == Some("input_required")
}

/// Reads an `input_required` result (its JSON text); `Err` says why it is unusable.
pub fn read(result: &str) -> Result<InputRequired, String> {
    let shape: Shape = serde_json::from_str(result)
        .map_err(|e| format!("the input_required result is malformed: {e}"))?;
    let mut requests = Vec::new();
    for (key, request) in shape.input_requests.unwrap_or_default() {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("input request {key:?} has no method"))?
            .to_owned();
        if !matches!(
            method.as_str(),
            "elicitation/create" | "sampling/createMessage" | "roots/list"
        ) {
            return Err(format!(
                "input request {key:?} asks for {method}, which is not an input request"
            ));
        }
        let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
        requests.push(InputRequest {
            key,
            method,
            params,
        });
    }
    if let Some(state) = &shape.request_state
        && !state.get().starts_with('"')
    {
        return Err("requestState must be a string".into());
    }
    if requests.is_empty() && shape.request_state.is_none() {
        return Err("an input_required result needs inputRequests or requestState".into());
    }
    Ok(InputRequired {
        requests,
        request_state: shape.request_state,
    })
}

/// Whether a host that declared `capabilities` may be asked `request`.
pub fn host_can_answer(capabilities: &Value, request: &InputRequest) -> bool {
    match request.method.as_str() {
        "elicitation/create" => {
            let Some(elicitation) = capabilities.get("elicitation").filter(|e| e.is_object())
            else {
                return false;
            };
            let url_mode = request.params.get("mode").and_then(Value::as_str) == Some("url");
            // `elicitation: {}` means form mode only.
            !url_mode || elicitation.get("url").is_some()
        }
        "sampling/createMessage" => capabilities.get("sampling").is_some_and(Value::is_object),
        "roots/list" => capabilities.get("roots").is_some_and(Value::is_object),
        _ => false,
    }
}

/// Whether a handshake-era server's request of this kind is the work of the call it arrives
/// during, so that a client unable to answer it fails that call with `-32021`. Elicitation
/// and sampling are asked by a tool as it runs. Roots are not: they describe the client's
/// workspace, and servers fetch them on their own schedule (server-everything asks 350 ms
/// after the handshake, whatever call is running then), so a client without roots gets the
/// question refused, as a handshake-era client without roots would refuse it, and the call
/// goes on.
pub fn belongs_to_the_call(method: &str) -> bool {
    matches!(method, "elicitation/create" | "sampling/createMessage")
}

/// The client capability a server request needs, as `requiredCapabilities` names it in a
/// `-32021` error; `None` for a request no client can be asked in an `input_required` round.
pub fn required_capability(method: &str, params: &Value) -> Option<Value> {
    match method {
        "elicitation/create" if params.get("mode").and_then(Value::as_str) == Some("url") => {
            Some(json!({"elicitation": {"url": {}}}))
        }
        "elicitation/create" => Some(json!({"elicitation": {}})),
        "sampling/createMessage" => Some(json!({"sampling": {}})),
        "roots/list" => Some(json!({"roots": {}})),
        _ => None,
    }
}

/// The retry's params: the original params, `inputResponses` keyed like the requests, and
/// `requestState` spliced in as the server's own bytes (absent if it sent none).
pub fn retry_params(
    original: &Map<String, Value>,
    responses: Map<String, Value>,
    state: Option<&RawValue>,
) -> String {
    let mut params = original.clone();
    params.remove("requestState");
    params.remove("inputResponses");
    if !responses.is_empty() {
        params.insert("inputResponses".into(), Value::Object(responses));
    }
    let text = serde_json::to_string(&params).expect("a JSON map serializes");
    match state {
        None => text,
        Some(state) => {
            let body = &text[..text.len() - 1];
            let comma = if params.is_empty() { "" } else { "," };
            format!("{body}{comma}\"requestState\":{}}}", state.get())
        }
    }
}

/// What the host gets when a multi-round call cannot go on: for `tools/call` a tool error
/// the model can read, for the others `None` (the caller answers with a JSON-RPC error).
pub fn tool_error_result(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn reads_requests_and_keeps_the_state_bytes() {
        let result = raw(
            r#"{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"m"}},"b":{"method":"roots/list"}},"requestState":"s\u00e9\"x"}"#,
        );
        assert_eq!(result_type(result.get()).as_deref(), Some("input_required"));
        let input = read(result.get()).unwrap();
        assert_eq!(input.requests.len(), 2);
        assert_eq!(input.request_state.unwrap().get(), r#""s\u00e9\"x""#);
    }

    #[test]
    fn the_result_type_is_found_however_its_key_is_written() {
        assert_eq!(result_type(r#"{"content":[],"isError":false}"#), None);
        assert_eq!(
            result_type(r#"{"result\u0054ype":"input_required"}"#).as_deref(),
            Some("input_required")
        );
        assert_eq!(
            result_type(r#"{"content":[{"type":"text","text":"resultType"}]}"#),
            None
        );
        assert_eq!(
            result_type(r#"{"resultType":"complete"}"#).as_deref(),
            Some("complete")
        );
    }

    #[test]
    fn refuses_what_is_not_an_input_request() {
        let bad =
            raw(r#"{"resultType":"input_required","inputRequests":{"a":{"method":"tools/call"}}}"#);
        assert!(read(bad.get()).is_err());
        let empty = raw(r#"{"resultType":"input_required"}"#);
        assert!(read(empty.get()).is_err());
    }

    #[test]
    fn the_retry_echoes_state_verbatim() {
        let original: Map<String, Value> =
            serde_json::from_str(r#"{"name":"t","arguments":{},"_meta":{"k":1}}"#).unwrap();
        let mut responses = Map::new();
        responses.insert("a".into(), json!({"action":"accept"}));
        let state = raw(r#""s\u00e9""#);
        let params = retry_params(&original, responses, Some(&state));
        assert!(
            params.ends_with(r#","requestState":"s\u00e9"}"#),
            "{params}"
        );
        let parsed: Value = serde_json::from_str(&params).unwrap();
        assert_eq!(parsed["inputResponses"]["a"]["action"], "accept");
        let none = retry_params(&Map::new(), Map::new(), Some(&state));
        assert_eq!(none, r#"{"requestState":"s\u00e9"}"#);
        assert_eq!(
            retry_params(&original, Map::new(), None),
            serde_json::to_string(&original).unwrap()
        );
    }

    #[test]
    fn the_host_is_asked_only_what_it_declared() {
        let form = InputRequest {
            key: "a".into(),
            method: "elicitation/create".into(),
            params: json!({"mode":"form"}),
        };
        let url = InputRequest {
            params: json!({"mode":"url","url":"https://x"}),
            ..form.clone()
        };
        assert!(host_can_answer(&json!({"elicitation":{}}), &form));
        assert!(!host_can_answer(&json!({"elicitation":{}}), &url));
        assert!(host_can_answer(&json!({"elicitation":{"url":{}}}), &url));
        assert!(!host_can_answer(&json!({}), &form));
    }
}
