//! The validation ladder for a 2026-07-28 request (§4.7.5), in this order, the first failure
//! answering: (1) the envelope in `params._meta` (400, `-32602`); (2) `MCP-Protocol-Version`
//! present and equal to the envelope's version (400, `-32020`); (3) `Mcp-Method` present and
//! equal to the method (400, `-32020`); (4) the version supported (400, `-32022` with
//! `supported` and `requested`); (5) `Mcp-Name` present and equal, after base64-sentinel
//! decoding, to `params.name`, `params.uri` or `params.taskId` where the method has one
//! (400, `-32020`); (6) the method known (404, `-32601`); (7) for the tasks extension's
//! methods, the client's opt-in (400, `-32021` with `requiredCapabilities`). Pure: headers
//! come in as a lookup.

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::era::envelope::{self, Claim, ClaimError};
use crate::era::headers::{decode_value, name_field};
use crate::era::tasks;
use crate::era::{
    HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::jsonrpc::error::{INVALID_PARAMS, METHOD_NOT_FOUND};

/// Methods a 2026-07-28 client may call through the gateway.
pub const MODERN_METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "completion/complete",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// A rung that failed: the HTTP status and the JSON-RPC error.
#[derive(Debug, PartialEq)]
pub struct Rejection {
    pub status: u16,
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

fn reject(status: u16, code: i64, message: impl Into<String>, data: Option<Value>) -> Rejection {
    Rejection {
        status,
        code,
        message: message.into(),
        data,
    }
}

/// Runs the ladder; `header` looks a request header up by its lower-case name (`None` also
/// when it appears more than once: an ambiguous routing header is as bad as a missing one).
pub fn check(
    method: &str,
    params: Option<&RawValue>,
    header: impl Fn(&str) -> Option<String>,
) -> Result<Claim, Rejection> {
    let claim = match envelope::read_claim(params) {
        Ok(Some(claim)) => claim,
        Ok(None) => {
            return Err(reject(
                400,
                INVALID_PARAMS,
                "Invalid params: params._meta needs io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
                None,
            ));
        }
        Err(ClaimError::Malformed(why)) => {
            return Err(reject(
                400,
                INVALID_PARAMS,
                format!("Invalid params: {why}"),
                None,
            ));
        }
        // The version is checked after the headers (rung 4); read what it claims.
        Err(ClaimError::Unsupported { requested }) => {
            check_headers(method, &requested, &header)?;
            return Err(reject(
                400,
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                Some(json!({"supported": MODERN_VERSIONS, "requested": requested})),
            ));
        }
    };
    check_headers(method, &claim.version, &header)?;
    if let Some(field) = name_field(method) {
        let body: Option<String> = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|p| p.get(field).and_then(Value::as_str).map(str::to_owned));
        match (header("mcp-name"), body) {
            (None, _) => return Err(mismatch("the Mcp-Name header is missing")),
            (Some(raw), body) => {
                let decoded = decode_value(&raw).ok_or_else(|| {
                    mismatch("the Mcp-Name header is not valid base64-sentinel encoding")
                })?;
                if body.as_deref() != Some(decoded.as_str()) {
                    return Err(mismatch(&format!(
                        "Mcp-Name header value does not match the body's params.{field}"
                    )));
                }
            }
        }
    }
    if !MODERN_METHODS.contains(&method) {
        return Err(reject(
            404,
            METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
            None,
        ));
    }
    // The tasks extension's methods are for clients that opted in to it (SEP-2663), asked
    // before any task is looked up.
    if method.starts_with("tasks/") && !tasks::opted_in(&claim.capabilities) {
        return Err(reject(
            400,
            MISSING_CLIENT_CAPABILITY,
            format!(
                "{method} needs the tasks extension: declare {} in clientCapabilities.extensions",
                tasks::EXTENSION
            ),
            Some(tasks::missing_capability_data()),
        ));
    }
    Ok(claim)
}

fn check_headers(
    method: &str,
    version: &str,
    header: &impl Fn(&str) -> Option<String>,
) -> Result<(), Rejection> {
    match header("mcp-protocol-version") {
        None => return Err(mismatch("the MCP-Protocol-Version header is missing")),
        Some(v) if v != version => {
            return Err(mismatch(
                "the MCP-Protocol-Version header disagrees with params._meta",
            ));
        }
        Some(_) => {}
    }
    match header("mcp-method") {
        None => Err(mismatch("the Mcp-Method header is missing")),
        Some(m) if m != method => Err(mismatch(
            "the Mcp-Method header disagrees with the body's method",
        )),
        Some(_) => Ok(()),
    }
}

fn mismatch(why: &str) -> Rejection {
    reject(
        400,
        HEADER_MISMATCH,
        format!("Header mismatch: {why}"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    #[test]
    fn every_rung() {
        let good = raw(&format!(r#"{{"name":"Zürich tool",{META}}}"#));
        let ok_headers = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?WsO8cmljaCB0b29s?="),
        ];
        assert!(check("tools/call", Some(&good), headers(&ok_headers)).is_ok());
        // 1. the envelope
        let bare = raw(r#"{"name":"x"}"#);
        assert_eq!(
            check("tools/call", Some(&bare), headers(&ok_headers))
                .unwrap_err()
                .code,
            -32602
        );
        // 2. and 3. the version and method headers
        let e = check(
            "tools/call",
            Some(&good),
            headers(&[("mcp-method", "tools/call")]),
        )
        .unwrap_err();
        assert_eq!((e.status, e.code), (400, -32020));
        let e = check(
            "tools/call",
            Some(&good),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.code, -32020);
        // 4. the version (after the headers agree with it)
        let old = raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        );
        let e = check(
            "tools/list",
            Some(&old),
            headers(&[
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/list"),
            ]),
        )
        .unwrap_err();
        assert_eq!((e.status, e.code), (400, -32022));
        assert_eq!(e.data.unwrap()["requested"], "2099-01-01");
        // 5. the name, decoded
        let e = check(
            "tools/call",
            Some(&good),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "other"),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.code, -32020);
        let e = check(
            "tools/call",
            Some(&good),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.code, -32020);
        // 6. the method
        let list = raw(&format!("{{{META}}}"));
        let e = check(
            "ping",
            Some(&list),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "ping"),
            ]),
        )
        .unwrap_err();
        assert_eq!((e.status, e.code), (404, -32601));
    }

    #[test]
    fn tasks_methods_are_routed_by_task_and_need_the_opt_in_after_the_headers() {
        let opted = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;
        let with = |meta: &str| raw(&format!(r#"{{"taskId":"t-1",{meta}}}"#));
        let routed = |name: &str| {
            vec![
                ("mcp-protocol-version", "2026-07-28".to_owned()),
                ("mcp-method", "tasks/get".to_owned()),
                ("mcp-name", name.to_owned()),
            ]
        };
        let lookup = |pairs: Vec<(&'static str, String)>| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        assert!(check("tasks/get", Some(&with(opted)), lookup(routed("t-1"))).is_ok());
        // The header names the task; another one is a mismatch, before anything else.
        let e = check("tasks/get", Some(&with(opted)), lookup(routed("t-2"))).unwrap_err();
        assert_eq!((e.status, e.code), (400, -32020));
        let e = check("tasks/get", Some(&with(META)), lookup(routed("t-2"))).unwrap_err();
        assert_eq!(e.code, -32020, "the header rung comes first");
        // Without the opt-in: -32021 with the capability that is missing.
        let e = check("tasks/get", Some(&with(META)), lookup(routed("t-1"))).unwrap_err();
        assert_eq!((e.status, e.code), (400, -32021));
        assert_eq!(e.data, Some(tasks::missing_capability_data()));
        // 2025-11-25's result and list methods are gone from 2026-07-28.
        for gone in ["tasks/result", "tasks/list"] {
            let mut headers = routed("t-1");
            headers[1].1 = gone.to_owned();
            let e = check(gone, Some(&with(opted)), lookup(headers)).unwrap_err();
            assert_eq!((e.status, e.code), (404, -32601), "{gone}");
        }
    }
}
