//! What a client is told when the policy stops its request, as a handshake-era answer line
//! under its id (a 2026-07-28 endpoint converts it as it converts a child's). Hidden: the
//! answer the server gives for a thing that does not exist. Refused: which rule and why, as
//! a tool error for a tool (a result every client shows the model) and as an error
//! otherwise.

use serde_json::{Value, json};

use super::about::About;
use crate::jsonrpc::error::{INVALID_PARAMS, error_response};

/// The MCP code for a resource that does not exist (2026-07-28 endpoints turn it into
/// `-32602`, as they do a server's).
const RESOURCE_NOT_FOUND: i64 = -32002;

/// The answer for a request about something the principal may not see.
pub fn hidden(raw_id: &str, about: About<'_>) -> Vec<u8> {
    match about {
        About::Tool(name) => error_response(
            raw_id,
            INVALID_PARAMS,
            &format!("Unknown tool: {name}"),
            None,
        ),
        About::Prompt(name) => error_response(
            raw_id,
            INVALID_PARAMS,
            &format!("Unknown prompt: {name}"),
            None,
        ),
        About::Resource(uri) => error_response(
            raw_id,
            RESOURCE_NOT_FOUND,
            "Resource not found",
            Some(json!({"uri": uri})),
        ),
    }
}

/// The answer for a request the call phase refused: `why` is the rule's message, or the
/// policy's account of what did not hold.
pub fn refused(raw_id: &str, about: About<'_>, rule: &str, why: &str) -> Vec<u8> {
    let told = told(rule, why);
    match about {
        About::Tool(_) => {
            let id: Value = serde_json::from_str(raw_id).unwrap_or(Value::Null);
            let answer = json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {
                    "content": [{"type": "text", "text": told}],
                    "isError": true,
                },
            });
            serde_json::to_vec(&answer).expect("JSON serializes")
        }
        About::Prompt(_) | About::Resource(_) => error_response(
            raw_id,
            INVALID_PARAMS,
            &told,
            Some(json!({"refusedBy": rule})),
        ),
    }
}

/// The text a refused client reads: always naming the rule, once.
fn told(rule: &str, why: &str) -> String {
    if rule == "default" || why.contains(&format!("{rule:?}")) {
        format!("Refused by the gateway's policy: {why}")
    } else {
        format!("Refused by the gateway's policy rule {rule:?}: {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_tool_call_is_a_tool_error_that_names_the_rule() {
        let line = refused(
            "7",
            About::Tool("write_file"),
            "read-only",
            "contractors may only use read-only tools",
        );
        let answer: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["isError"], true);
        assert_eq!(
            answer["result"]["content"][0]["text"],
            "Refused by the gateway's policy rule \"read-only\": contractors may only use read-only tools"
        );
    }

    #[test]
    fn a_hidden_thing_is_answered_as_the_server_answers_a_missing_one() {
        let answer: Value = serde_json::from_slice(&hidden("\"a\"", About::Tool("x"))).unwrap();
        assert_eq!(answer["error"]["code"], -32602);
        assert_eq!(answer["error"]["message"], "Unknown tool: x");
        let answer: Value =
            serde_json::from_slice(&hidden("1", About::Resource("file:///s"))).unwrap();
        assert_eq!(answer["error"]["code"], -32002);
        assert_eq!(answer["error"]["data"]["uri"], "file:///s");
    }

    #[test]
    fn the_rule_is_named_once() {
        let why = "the policy rule \"tmp-only\" refused this: its requirement does not hold";
        assert_eq!(
            told("tmp-only", why),
            format!("Refused by the gateway's policy: {why}")
        );
    }
}
