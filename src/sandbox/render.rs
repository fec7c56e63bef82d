//! A tool's output as an MCP `CallToolResult`: assembled whole first (the content block,
//! fenced when it is workspace content, and `structuredContent` with the untrusted-content
//! assessment), then redacted in one pass over everything, then the redaction report
//! attached. A refusal is a result too, with `isError`, its problem document and a `remedy`.

use serde_json::{Value, json};

use super::redact::{Report, redact};
use super::tools::{Failure, Output};
use super::untrusted::{Fence, assess};

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

/// A refusal in-band: the text for the model, and the RFC 9457 problem document (with the
/// remedy, and `error` as before) as `structuredContent`.
pub fn refusal(failure: &Failure) -> Value {
    let mut structured = failure
        .problem
        .document(&failure.message, &failure.invalid_params);
    structured["remedy"] = failure.remedy.clone().into();
    structured["error"] = failure.message.clone().into();
    let mut result = json!({
        "content": [{"type": "text", "text": format!("{}. {}", failure.message, failure.remedy)}],
        "structuredContent": structured,
        "isError": true,
    });
    redact(&mut result, &mut Report::default());
    result
}
