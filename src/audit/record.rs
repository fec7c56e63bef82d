//! One audit line: who did what, to which server, how it ended and how long it took, as a
//! JSON object on one line. The arguments go in as a digest; their values only when the
//! operator asked for them, and then redacted as the sandbox redacts its results. No
//! token or header value has a field here.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::trace_context::TraceContext;

/// How an operation ended, as its client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A result.
    Ok,
    /// A tool's result with `isError`.
    ToolError,
    /// Stopped by a policy rule (`rule` names it).
    Refused,
    /// A JSON-RPC error, or an HTTP refusal of the request.
    ProtocolError,
    /// No answer in time (`--timeout-response`).
    Timeout,
    /// The client went away (or cancelled) before the answer.
    Cancelled,
    /// A 2026-07-28 call waiting for the client's input (`resultType: input_required`).
    InputRequired,
}

/// One operation. What costs (the time's text, the arguments' digest, their redaction) is
/// done when the line is written, on the writer's thread, not on the request's path.
#[derive(Debug, Clone)]
pub struct Record {
    /// When it began.
    pub time: SystemTime,
    pub principal: Option<String>,
    /// The client application's `name/version`.
    pub client: Option<String>,
    /// The server (a config file's name; at an aggregate endpoint, the endpoint's).
    pub server: Option<String>,
    /// At an aggregate endpoint, the member server the request went to.
    pub backend: Option<String>,
    pub method: String,
    /// The tool or prompt name, or the resource URI.
    pub name: Option<String>,
    /// The arguments as sent: written as `arguments_digest`, and (redacted) as
    /// `arguments` when `with_values`.
    pub arguments: Option<Value>,
    pub with_values: bool,
    pub outcome: Outcome,
    /// The policy rule that refused it.
    pub rule: Option<String>,
    /// The JSON-RPC error code, or the HTTP status of a refusal.
    pub error_code: Option<i64>,
    pub duration_ms: f64,
    /// The JSON-RPC id, as the client sent it.
    pub id: Value,
    pub session: Option<String>,
    pub trace_id: Option<String>,
}

/// A record as its line is written.
#[derive(Serialize)]
struct Line<'a> {
    time: String,
    principal: &'a Option<String>,
    client: &'a Option<String>,
    server: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backend: &'a Option<String>,
    method: &'a str,
    name: &'a Option<String>,
    arguments_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Value>,
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<i64>,
    duration_ms: f64,
    id: &'a Value,
    session: &'a Option<String>,
    trace_id: &'a Option<String>,
}

impl Serialize for Record {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Line {
            time: timestamp(self.time),
            principal: &self.principal,
            client: &self.client,
            server: &self.server,
            backend: &self.backend,
            method: &self.method,
            name: &self.name,
            arguments_digest: self.arguments.as_ref().map(digest),
            arguments: self
                .arguments
                .as_ref()
                .filter(|_| self.with_values)
                .map(redacted),
            outcome: self.outcome,
            rule: &self.rule,
            error_code: self.error_code,
            duration_ms: self.duration_ms,
            id: &self.id,
            session: &self.session,
            trace_id: &self.trace_id,
        }
        .serialize(serializer)
    }
}

/// What the outcome is read from in an answer; the rest is skipped, not built.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(default)]
    error: Option<ErrorPart>,
    #[serde(default, borrow)]
    result: Option<ResultPart<'a>>,
}

#[derive(Deserialize)]
struct ErrorPart {
    #[serde(default)]
    code: Option<i64>,
}

#[derive(Deserialize)]
struct ResultPart<'a> {
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    #[serde(default, rename = "resultType", borrow)]
    result_type: Option<std::borrow::Cow<'a, str>>,
}

impl Record {
    /// A record of nothing, left where one was taken out.
    pub(super) fn blank() -> Record {
        Record {
            time: SystemTime::UNIX_EPOCH,
            principal: None,
            client: None,
            server: None,
            backend: None,
            method: String::new(),
            name: None,
            arguments: None,
            with_values: false,
            outcome: Outcome::Ok,
            rule: None,
            error_code: None,
            duration_ms: 0.0,
            id: Value::Null,
            session: None,
            trace_id: None,
        }
    }

    /// The line of a request as it arrives: its method, id, target, arguments and the
    /// trace of its `_meta.traceparent`; the rest is for the caller to fill.
    pub fn of_request(method: &str, raw_id: &str, mut params: Value, with_values: bool) -> Record {
        let named = params
            .get("name")
            .or_else(|| params.get("uri"))
            .or_else(|| params.pointer("/ref/name"))
            .or_else(|| params.pointer("/ref/uri"))
            .and_then(Value::as_str)
            .map(shown_name);
        let trace = TraceContext::from_meta(&params).map(|t| t.trace_id().to_owned());
        let arguments = match params.get_mut("arguments") {
            Some(arguments) => Some(arguments.take()),
            None => params.get_mut("argument").map(Value::take),
        };
        Record {
            time: SystemTime::now(),
            principal: None,
            client: None,
            server: None,
            backend: None,
            method: method.to_owned(),
            name: named,
            arguments,
            with_values,
            outcome: Outcome::Ok,
            rule: None,
            error_code: None,
            duration_ms: 0.0,
            id: serde_json::from_str(raw_id).unwrap_or(Value::Null),
            session: None,
            trace_id: trace,
        }
    }

    /// The outcome of the JSON-RPC answer (its bytes) the client was sent (a refusal
    /// already noted stays one).
    pub fn answered(&mut self, answer: &[u8]) {
        let Ok(answer) = serde_json::from_slice::<Answer<'_>>(answer) else {
            return;
        };
        if let Some(code) = answer.error.as_ref().and_then(|e| e.code) {
            self.error_code = Some(code);
        }
        if self.outcome == Outcome::Refused {
            return;
        }
        let result = answer.result.as_ref();
        self.outcome = if answer.error.is_some() {
            Outcome::ProtocolError
        } else if result.and_then(|r| r.is_error) == Some(true) {
            Outcome::ToolError
        } else if result.and_then(|r| r.result_type.as_deref()) == Some("input_required") {
            Outcome::InputRequired
        } else {
            Outcome::Ok
        };
    }
}

/// `time` as RFC 3339 UTC with milliseconds.
pub fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// `sha256:HEX` of `arguments` as JSON with every object's keys sorted (so equal
/// arguments have equal digests whatever order the client wrote them in).
pub fn digest(arguments: &Value) -> String {
    let mut text = Vec::new();
    canonical(arguments, &mut text);
    let sum = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &text);
    format!("sha256:{}", ::hex::encode(sum.as_ref()))
}

/// `value` as compact JSON with sorted keys.
fn canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (n, key) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("JSON serializes");
                out.push(b':');
                canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        other => serde_json::to_writer(&mut *out, other).expect("JSON serializes"),
    }
}

/// `arguments` with every secret-looking string redacted, and every value under a key
/// that names a secret (`password`, `client_secret`, `api_key`, `token`, …).
pub fn redacted(arguments: &Value) -> Value {
    let mut copy = arguments.clone();
    hide_secret_keys(&mut copy);
    let mut report = crate::redact::Report::default();
    crate::redact::redact(&mut copy, &mut report);
    copy
}

fn hide_secret_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if names_a_secret(key) {
                    *value = Value::String("[redacted]".into());
                } else {
                    hide_secret_keys(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(hide_secret_keys),
        _ => {}
    }
}

fn names_a_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace(['-', '_'], "");
    [
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "authorization",
        "credential",
        "cookie",
        "privatekey",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// A tool or prompt name, or a resource URI, as a line shows it: a URI's query, fragment
/// and user info (where a secret may ride) left out, any secret-looking text redacted.
fn shown_name(name: &str) -> String {
    let mut shown = match url::Url::parse(name) {
        Ok(mut url)
            if url.query().is_some() || url.password().is_some() || !url.username().is_empty() =>
        {
            url.set_query(None);
            url.set_fragment(None);
            let _ = url.set_username("");
            let _ = url.set_password(None);
            Value::String(url.to_string())
        }
        _ => Value::String(name.to_owned()),
    };
    crate::redact::redact(&mut shown, &mut crate::redact::Report::default());
    match shown {
        Value::String(text) => text,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_does_not_depend_on_key_order() {
        let a = digest(&json!({"b": 1, "a": "x"}));
        let b = digest(&serde_json::from_str::<Value>(r#"{"a":"x","b":1}"#).unwrap());
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64, "{a}");
    }

    #[test]
    fn names_lose_their_query_and_user_info_and_secret_keys_their_values() {
        let record = Record::of_request(
            "resources/read",
            "1",
            json!({"uri": "https://user:pw@example.com/doc?access_token=abc#x"}),
            true,
        );
        assert_eq!(record.name.as_deref(), Some("https://example.com/doc"));
        let clean =
            redacted(&json!({"client_secret": "s3", "nested": {"API-Key": 7, "path": "/x"}}));
        assert_eq!(
            clean,
            json!({"client_secret": "[redacted]", "nested": {"API-Key": "[redacted]", "path": "/x"}})
        );
    }

    #[test]
    fn redaction_keeps_the_shape_and_hides_the_secret() {
        let clean = redacted(
            &json!({"path": "/tmp/x", "token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}),
        );
        assert_eq!(clean["path"], "/tmp/x");
        assert!(
            !clean
                .to_string()
                .contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            "{clean}"
        );
    }
}
