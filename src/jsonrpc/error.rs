//! Standard JSON-RPC error codes and builders for the errors the relay synthesizes.

use serde_json::value::RawValue;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Implementation-defined server error: used for every upstream or transport failure.
pub const UPSTREAM_ERROR: i64 = -32000;

/// A synthesized error response, as one compact line. `id` is the raw id text (or `null`).
pub fn error_response(
    id: &str,
    code: i64,
    message: &str,
    data: Option<serde_json::Value>,
) -> Vec<u8> {
    let mut error = serde_json::Map::new();
    error.insert("code".into(), code.into());
    error.insert("message".into(), message.into());
    if let Some(data) = data {
        error.insert("data".into(), data);
    }
    let error = serde_json::to_string(&error).expect("a map of plain values serializes");
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#).into_bytes()
}

/// A response that carries an upstream `error` object verbatim under the host's id.
pub fn with_error_object(id: &str, error: &RawValue) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#, error.get()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_compact_error() {
        let line = error_response(
            "\"a\"",
            UPSTREAM_ERROR,
            "HTTP 502 from upstream",
            Some(serde_json::json!({"httpStatus":502})),
        );
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"HTTP 502 from upstream","data":{"httpStatus":502}}}"#
        );
    }
}
