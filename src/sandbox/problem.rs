//! The sandbox's refusals as RFC 9457 problem documents: one kind per thing that can go
//! wrong, each with a stable `code` a model (or a program) can branch on, and the `type`,
//! `title` and `status` that always go with that code, so one code never travels with two
//! meanings. Nothing here knows JSON-RPC: the server decides which channel a problem
//! takes (in-band `isError` result, or a protocol error's `data`).

use serde_json::{Value, json};

/// What kind of thing went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// The argument names something the sandbox will not serve: outside the workspace, on
    /// the denylist, unreadable to the process, or (SQL) not granted to the role.
    AccessDenied,
    /// The path does not exist.
    NotFound,
    /// The arguments are wrong in a way the caller can fix.
    Validation,
    /// The query is not one the read-only policy allows (or the database refused a write).
    QueryViolation,
    /// The content is not of a kind the tool returns (a binary file).
    Unsupported,
    /// The call ran out of time.
    Timeout,
    /// Every slot stayed busy for the whole bounded wait.
    Busy,
    /// The call was cancelled (its answer is never sent; kept for completeness).
    Cancelled,
    /// Something on the server's side failed; a protocol error, details on stderr only.
    Internal,
}

impl Problem {
    pub fn code(self) -> &'static str {
        match self {
            Problem::AccessDenied => "MCP_ACCESS_DENIED",
            Problem::NotFound => "MCP_NOT_FOUND",
            Problem::Validation => "MCP_VALIDATION_ERROR",
            Problem::QueryViolation => "MCP_QUERY_VIOLATION",
            Problem::Unsupported => "MCP_UNSUPPORTED_CONTENT",
            Problem::Timeout => "MCP_EXECUTION_TIMEOUT",
            Problem::Busy => "MCP_BUSY",
            Problem::Cancelled => "MCP_CANCELLED",
            Problem::Internal => "MCP_INTERNAL_ERROR",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Problem::AccessDenied => "Access to the requested resource is denied",
            Problem::NotFound => "The requested resource does not exist",
            Problem::Validation => "Invalid tool arguments",
            Problem::QueryViolation => "The query is not allowed by the read-only policy",
            Problem::Unsupported => "The content is not of a kind this tool returns",
            Problem::Timeout => "The call ran out of time",
            Problem::Busy => "The server is busy",
            Problem::Cancelled => "The call was cancelled",
            Problem::Internal => "The server failed",
        }
    }

    /// The HTTP status the problem would have on its own (RFC 9457 §3.1.2); 499 is the
    /// status proxies use for a request its client gave up on.
    pub fn status(self) -> u16 {
        match self {
            Problem::AccessDenied | Problem::QueryViolation => 403,
            Problem::NotFound => 404,
            Problem::Validation => 422,
            Problem::Unsupported => 415,
            Problem::Timeout => 504,
            Problem::Busy => 503,
            Problem::Cancelled => 499,
            Problem::Internal => 500,
        }
    }

    /// A URN rather than a URL: nothing to dereference, and stable whatever the host.
    pub fn type_uri(self) -> String {
        let slug = self
            .code()
            .trim_start_matches("MCP_")
            .to_ascii_lowercase()
            .replace('_', "-");
        format!("urn:mcp-stdio:problem:{slug}")
    }

    /// The problem document for one occurrence: what happened (`detail`) and which
    /// arguments were at fault (`invalid_params`, by name).
    pub fn document(self, detail: &str, invalid_params: &[String]) -> Value {
        json!({
            "type": self.type_uri(),
            "title": self.title(),
            "status": self.status(),
            "detail": detail,
            "code": self.code(),
            "invalid_params": invalid_params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Problem; 9] = [
        Problem::AccessDenied,
        Problem::NotFound,
        Problem::Validation,
        Problem::QueryViolation,
        Problem::Unsupported,
        Problem::Timeout,
        Problem::Busy,
        Problem::Cancelled,
        Problem::Internal,
    ];

    #[test]
    fn each_code_has_one_type_title_and_status() {
        let mut codes: Vec<_> = ALL.iter().map(|p| p.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), ALL.len(), "codes are distinct");
        for problem in ALL {
            let document = problem.document("what happened", &["path".to_owned()]);
            assert_eq!(document["code"], problem.code());
            assert_eq!(document["type"], problem.type_uri());
            assert!(problem.type_uri().starts_with("urn:mcp-stdio:problem:"));
            assert!((400..600).contains(&document["status"].as_u64().unwrap()));
            assert_eq!(document["invalid_params"], json!(["path"]));
        }
        assert_eq!(
            Problem::QueryViolation.type_uri(),
            "urn:mcp-stdio:problem:query-violation"
        );
    }
}
