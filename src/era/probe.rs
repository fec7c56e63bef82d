//! Upstream era detection over Streamable HTTP (§4.15): what a `server/discover` probe's
//! outcome says about the server, using only the evidence the spec names.

use serde::Deserialize;
use serde_json::Value;

use super::{
    HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
};

/// What a probe established.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A modern server. `discover` is its DiscoverResult when it gave one (a recognised
    /// modern error proves the era without describing the server).
    Modern {
        version: String,
        discover: Option<Value>,
    },
    /// Modern, but it refused our version: probe again with this one (once per version).
    RetryWith(String),
    /// A handshake-era server: use `initialize`, byte-for-byte legacy traffic.
    Legacy,
    /// A modern server that shares no modern version with the relay: a hard error.
    NoCommonVersion(Vec<String>),
    /// Not era evidence (authorization, server failure): decide nothing.
    Undecided(String),
}

#[derive(Deserialize)]
struct Answer {
    result: Option<Value>,
    error: Option<ErrorObject>,
}

#[derive(Deserialize)]
struct ErrorObject {
    code: Option<i64>,
    data: Option<Value>,
}

/// Classifies the probe's HTTP status and the JSON-RPC answer found in its body, if any.
/// `sent` is the version the probe proposed.
pub fn classify(status: u16, answer: Option<&[u8]>, sent: &str) -> Verdict {
    if matches!(status, 401 | 403) {
        return Verdict::Undecided(format!("HTTP {status} (authorization comes first)"));
    }
    if status >= 500 {
        return Verdict::Undecided(format!("HTTP {status} from the server"));
    }
    let answer = answer.and_then(|a| serde_json::from_slice::<Answer>(a).ok());
    match answer {
        Some(Answer {
            result: Some(result),
            ..
        }) if (200..300).contains(&status) => from_discover(result),
        Some(Answer {
            error: Some(error), ..
        }) if status < 500 => from_error(error, sent),
        _ if (200..300).contains(&status) || matches!(status, 400 | 404 | 405 | 406 | 415) => {
            Verdict::Legacy
        }
        _ => Verdict::Undecided(format!("HTTP {status} without a JSON-RPC answer")),
    }
}

fn versions(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The newest version both sides speak, if any; else whether the peer lists modern ones.
fn pick(offered: &[String]) -> Result<String, bool> {
    MODERN_VERSIONS
        .iter()
        .rev()
        .find(|v| offered.iter().any(|o| o == *v))
        .map(|v| (*v).to_owned())
        .ok_or_else(|| offered.iter().any(|v| super::is_modern_version(v)))
}

fn from_discover(result: Value) -> Verdict {
    let offered = versions(result.get("supportedVersions"));
    if !result.is_object() || result.get("supportedVersions").is_none() {
        return Verdict::Legacy;
    }
    match pick(&offered) {
        Ok(version) => Verdict::Modern {
            version,
            discover: Some(result),
        },
        Err(true) => Verdict::NoCommonVersion(offered),
        // A DiscoverResult listing only handshake versions (go-sdk's stateful default).
        Err(false) => Verdict::Legacy,
    }
}

fn from_error(error: ErrorObject, sent: &str) -> Verdict {
    match error.code {
        Some(UNSUPPORTED_PROTOCOL_VERSION) => {
            let offered = versions(error.data.as_ref().and_then(|d| d.get("supported")));
            match pick(&offered) {
                Ok(version) if version != sent => Verdict::RetryWith(version),
                Ok(version) => Verdict::Modern {
                    version,
                    discover: None,
                },
                Err(true) => Verdict::NoCommonVersion(offered),
                Err(false) => Verdict::Legacy,
            }
        }
        Some(HEADER_MISMATCH | MISSING_CLIENT_CAPABILITY) => Verdict::Modern {
            version: sent.to_owned(),
            discover: None,
        },
        // -32601 from a stateless legacy server, -32600/-32602/-32000 from stateful ones,
        // and any other code: the fallback must not depend on one particular code.
        _ => Verdict::Legacy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "2026-07-28";

    fn c(status: u16, body: &str) -> Verdict {
        classify(status, (!body.is_empty()).then_some(body.as_bytes()), V)
    }

    #[test]
    fn the_probing_table() {
        let discover = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{}}}"#;
        assert!(matches!(
            c(200, discover),
            Verdict::Modern {
                discover: Some(_),
                ..
            }
        ));
        let go_sdk = r#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-06-18"],"capabilities":{}}}"#;
        assert_eq!(c(200, go_sdk), Verdict::Legacy);
        let future = r#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2027-01-01"],"capabilities":{}}}"#;
        assert!(matches!(c(200, future), Verdict::NoCommonVersion(_)));
        assert_eq!(
            c(200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Verdict::Legacy
        );
        let not_found =
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#;
        assert_eq!(c(200, not_found), Verdict::Legacy);
        assert_eq!(c(404, not_found), Verdict::Legacy);
        let session = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#;
        assert_eq!(c(400, session), Verdict::Legacy);
        assert_eq!(c(400, ""), Verdict::Legacy);
        assert_eq!(c(404, ""), Verdict::Legacy);
        assert_eq!(c(405, ""), Verdict::Legacy);
        assert_eq!(c(200, ""), Verdict::Legacy);
        let unsupported = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}"#;
        assert!(matches!(
            c(400, unsupported),
            Verdict::Modern { discover: None, .. }
        ));
        let legacy_only = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"]}}}"#;
        assert_eq!(c(400, legacy_only), Verdict::Legacy);
        let disjoint = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2027-01-01"]}}}"#;
        assert!(matches!(c(400, disjoint), Verdict::NoCommonVersion(_)));
        let mismatch = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"x"}}"#;
        assert!(matches!(c(400, mismatch), Verdict::Modern { .. }));
        assert!(matches!(c(401, ""), Verdict::Undecided(_)));
        assert!(matches!(c(403, discover), Verdict::Undecided(_)));
        assert!(matches!(c(500, not_found), Verdict::Undecided(_)));
        assert!(matches!(c(503, ""), Verdict::Undecided(_)));
    }

    #[test]
    fn a_session_not_found_code_is_not_modern_evidence() {
        let ts =
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Session not found"}}"#;
        assert_eq!(c(404, ts), Verdict::Legacy);
    }
}
