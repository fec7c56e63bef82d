//! The HTTP headers a 2026-07-28 request carries as mirrors of its body (§4.7.2–4.7.3):
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and the value encoding they share with
//! `Mcp-Param-*`.

use base64::Engine;
use serde_json::{Map, Value};

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method`.
pub const METHOD: &str = "mcp-method";
/// `Mcp-Name`.
pub const NAME: &str = "mcp-name";
/// The prefix of headers mirrored from `x-mcp-header` tool arguments.
pub const PARAM_PREFIX: &str = "mcp-param-";

const SENTINEL_OPEN: &str = "=?base64?";
const SENTINEL_CLOSE: &str = "?=";

/// A value as it may travel in a header: plain when it is visible ASCII (plus inner spaces
/// and tabs) and does not look like the sentinel; otherwise `=?base64?…?=` of its UTF-8.
pub fn encode_value(value: &str) -> String {
    if is_plain(value) {
        value.to_owned()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
        format!("{SENTINEL_OPEN}{encoded}{SENTINEL_CLOSE}")
    }
}

fn is_plain(value: &str) -> bool {
    let bytes = value.as_bytes();
    let allowed = |b: &u8| (0x20..=0x7e).contains(b) || *b == b'\t';
    let edge_space = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let sentinel = value.starts_with(SENTINEL_OPEN) && value.ends_with(SENTINEL_CLOSE);
    bytes.iter().all(allowed)
        && !edge_space(bytes.first())
        && !edge_space(bytes.last())
        && !sentinel
}

/// A header value as the body has it: `=?base64?…?=` decoded, anything else as it is.
/// `None` when the sentinel's payload is not base64 of UTF-8.
pub fn decode_value(value: &str) -> Option<String> {
    match value
        .strip_prefix(SENTINEL_OPEN)
        .and_then(|v| v.strip_suffix(SENTINEL_CLOSE))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// The standard headers of one modern request: (lower-case name, value) pairs. Fails when
/// the method itself cannot be a header value (the spec defines no encoding for it).
pub fn standard(
    version: &str,
    method: &str,
    params: Option<&Map<String, Value>>,
) -> Result<Vec<(&'static str, String)>, String> {
    let name = name_field(method)
        .and_then(|field| params.and_then(|p| p.get(field)))
        .and_then(Value::as_str);
    standard_named(version, method, name)
}

/// Which field of `params` `Mcp-Name` mirrors for `method`, if any.
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The tasks extension (SEP-2663) routes its calls by task.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// [`standard`] with the `Mcp-Name` value already picked out (see [`name_field`]).
pub fn standard_named(
    version: &str,
    method: &str,
    name: Option<&str>,
) -> Result<Vec<(&'static str, String)>, String> {
    if !is_visible_ascii(method.as_bytes()) {
        return Err(format!(
            "the method {method:?} cannot be sent to a 2026-07-28 server: Mcp-Method must be visible ASCII"
        ));
    }
    let mut headers = vec![
        (PROTOCOL_VERSION, version.to_owned()),
        (METHOD, method.to_owned()),
    ];
    if let Some(name) = name.filter(|_| name_field(method).is_some()) {
        headers.push((NAME, encode_value(name)));
    }
    Ok(headers)
}

/// Whether `bytes` is a token of visible ASCII (0x21–0x7E: no spaces, no controls), the
/// rule for session ids, bearer secrets and header-borne names, so that nothing taken
/// from a peer or an operator can break a header line.
pub fn is_visible_ascii(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|b| (0x21..=0x7e).contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_as_the_spec_examples_do() {
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(
            encode_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_value("two words"), "two words");
        assert_eq!(encode_value("\tlead"), "=?base64?CWxlYWQ=?=");
        assert_eq!(encode_value("a\r\nb"), "=?base64?YQ0KYg==?=");
        assert_eq!(
            encode_value("=?base64?abc?="),
            "=?base64?PT9iYXNlNjQ/YWJjPz0=?="
        );
        assert_eq!(encode_value(""), "");
    }

    #[test]
    fn names_come_from_name_or_uri() {
        let params = json!({"name": "get weather", "uri": "x"});
        let headers = standard("2026-07-28", "tools/call", params.as_object()).unwrap();
        assert_eq!(
            headers,
            vec![
                (PROTOCOL_VERSION, "2026-07-28".to_owned()),
                (METHOD, "tools/call".to_owned()),
                (NAME, "get weather".to_owned()),
            ]
        );
        let read = json!({"uri": "file:///ä"});
        let headers = standard("2026-07-28", "resources/read", read.as_object()).unwrap();
        assert_eq!(headers[2], (NAME, encode_value("file:///ä")));
        let list = standard("2026-07-28", "tools/list", None).unwrap();
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn decoding_inverts_encoding() {
        for value in [
            "us-west1",
            "Hello, 世界",
            " padded ",
            "=?base64?abc?=",
            "a\r\nb",
        ] {
            assert_eq!(decode_value(&encode_value(value)).as_deref(), Some(value));
        }
        assert_eq!(decode_value("=?base64?!!!?="), None);
    }

    #[test]
    fn a_method_that_is_not_ascii_is_refused() {
        assert!(standard("2026-07-28", "tööls/list", None).is_err());
    }
}
