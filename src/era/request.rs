//! The JSON-RPC request lines the translations write: from a params tree, or from params
//! already written as JSON text (spliced, never re-encoded).

use serde_json::{Map, Value};

/// One request line from its parts.
pub fn request_line(id: &str, method: &str, params: &Map<String, Value>) -> Vec<u8> {
    let params = serde_json::to_string(params).expect("a JSON map serializes");
    request_text(id, method, &params)
}

/// `{"jsonrpc":"2.0","id":ID,"method":"METHOD","params":PARAMS}` with the params given as
/// JSON text. Built by concatenation: a translated request is built once per call, and
/// `format!`'s machinery cost more than the copying (about 1 500 instructions, callgrind).
pub fn request_text(id: &str, method: &str, params: &str) -> Vec<u8> {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    const METHOD: &[u8] = br#","method":"#;
    const PARAMS: &[u8] = br#","params":"#;
    let mut line = Vec::with_capacity(
        HEAD.len() + id.len() + METHOD.len() + method.len() + 2 + PARAMS.len() + params.len() + 1,
    );
    line.extend_from_slice(HEAD);
    line.extend_from_slice(id.as_bytes());
    line.extend_from_slice(METHOD);
    serde_json::to_writer(&mut line, method).expect("a string serializes");
    line.extend_from_slice(PARAMS);
    line.extend_from_slice(params.as_bytes());
    line.push(b'}');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_text_is_the_formatted_line() {
        let line = request_text(r#""id-1""#, "tools/\"call", r#"{"name":"x"}"#);
        let expected = format!(
            r#"{{"jsonrpc":"2.0","id":"id-1","method":{},"params":{{"name":"x"}}}}"#,
            serde_json::to_string("tools/\"call").unwrap()
        );
        assert_eq!(String::from_utf8(line).unwrap(), expected);
        let mut params = Map::new();
        params.insert("a".into(), json!([1, "é"]));
        assert_eq!(
            String::from_utf8(request_line("3", "ping", &params)).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":[1,"é"]}}"#
        );
    }
}
