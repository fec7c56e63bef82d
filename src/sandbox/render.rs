//! A tool's output as an MCP `CallToolResult`: assembled whole first (the content block,
//! fenced when it is workspace content, and `structuredContent` with the untrusted-content
//! assessment), then redacted in one pass over everything, then the redaction report
//! attached. A refusal is a result too, with `isError`, its words, and its problem document
//! (with a `remedy`) as a JSON block and in `_meta`, never as `structuredContent`.

use serde_json::{Value, json};

use super::tools::{Failure, Output};
use super::untrusted::{Fence, assess};
use crate::redact::{Report, redact};

pub fn success(output: Output) -> Value {
    let mut structured = output.structured;
    let text = match &output.untrusted {
        Some(source) => {
            let fence = Fence::new();
            // Assessed on the raw text: redacting first would hide an instruction that
            // sits next to a credential.
            let mut verdict = assess(&output.text);
            verdict["nonce"] = fence.nonce.clone().into();
            structured["untrusted"] = verdict;
            fence.wrap(source, &output.text)
        }
        None => output.text,
    };
    let mut result = json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": false,
    });
    let mut report = Report::default();
    redact(&mut result, &mut report);
    result["structuredContent"]["redaction"] = report.to_json();
    result
}

/// Where a refusal's problem document travels in `_meta` (a prefixed key, as the spec asks of
/// implementation-defined `_meta`).
pub const PROBLEM_META_KEY: &str = "mcp-stdio/problem";

/// A refusal in-band: the words for the model and the person (what was refused, why, what
/// would work) as the first text block, the RFC 9457 problem document (with the remedy, and
/// `error` as before) as a JSON text block and in `_meta`. Never as `structuredContent`: that
/// must match the tool's `outputSchema`, and the TypeScript SDK client (Claude Code, Claude
/// Desktop, Cursor, VS Code, the Inspector) validates it on error results too, so a problem
/// document there hides the refusal behind a schema error (docs/sandbox.md, WORKAROUNDS).
pub fn refusal(failure: &Failure) -> Value {
    let mut problem = failure
        .problem
        .document(&failure.message, &failure.invalid_params);
    problem["remedy"] = failure.remedy.clone().into();
    problem["error"] = failure.message.clone().into();
    let mut result = json!({
        "content": [
            {"type": "text", "text": format!("{}. {}", failure.message, failure.remedy)},
        ],
        "isError": true,
        "_meta": {PROBLEM_META_KEY: problem},
    });
    redact(&mut result, &mut Report::default());
    // The JSON block is written from the redacted document: serialized first, a secret
    // after a newline would sit behind `\n` and slip past the rules' word boundaries.
    let block = result["_meta"][PROBLEM_META_KEY].to_string();
    result["content"]
        .as_array_mut()
        .expect("content is an array")
        .push(json!({"type": "text", "text": block}));
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::problem::Problem;

    #[test]
    fn a_secret_in_a_refusal_is_redacted_in_every_place_it_travels() {
        let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        let failure = Failure::new(
            Problem::Validation,
            format!("the database refused the query:\n{token} is not a column"),
            "fix the query",
        );
        let result = refusal(&failure);
        let text = result.to_string();
        assert!(!text.contains(&token), "{text}");
        let block: Value =
            serde_json::from_str(result["content"][1]["text"].as_str().unwrap()).unwrap();
        assert_eq!(block, result["_meta"][PROBLEM_META_KEY]);
        assert!(result.get("structuredContent").is_none());
    }
}
