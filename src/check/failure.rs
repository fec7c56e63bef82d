//! Why a check failed, and the one line saying what would help: the failures every step
//! shares (an unreachable host, a URL that is not an MCP endpoint, an HTTP status).

use http::StatusCode;
use url::Url;

use super::wire::WireError;

pub(super) struct Failed {
    pub(super) error: String,
    pub(super) hint: String,
}

pub(super) fn failed(error: impl Into<String>, hint: impl Into<String>) -> Failed {
    Failed {
        error: error.into(),
        hint: hint.into(),
    }
}

pub(super) fn unreachable(url: &Url, e: &WireError) -> Failed {
    match e {
        WireError::Network(why) => unreachable_message(url, why),
        WireError::Protocol(why) => failed(
            why.clone(),
            "check the URL is the server's MCP endpoint (often /mcp or /sse)",
        ),
    }
}

pub(super) fn unreachable_message(url: &Url, why: &str) -> Failed {
    let place = match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        _ => url.as_str().to_owned(),
    };
    failed(
        format!("cannot reach {place}: {why}"),
        "is the server running, and are the host and port right? (a proxy, if any, comes from HTTPS_PROXY / HTTP_PROXY)",
    )
}

pub(super) fn hint_for_status(status: StatusCode, url: &Url) -> String {
    match status.as_u16() {
        404 => "check the path: MCP endpoints are often /mcp (Streamable HTTP) or /sse (HTTP+SSE)"
            .into(),
        405 => "this URL does not take MCP POSTs; check the path (often /mcp or /sse)".into(),
        429 | 503 => "the server is busy or starting; try again shortly".into(),
        501 => format!(
            "{url} does not take POST requests: it is not an MCP endpoint (those are often /mcp or /sse)"
        ),
        500..=599 => "the server failed; its own logs will say why".into(),
        200..=299 => format!(
            "{url} answered, but not as an MCP server: is this the MCP endpoint (often /mcp or /sse)?"
        ),
        _ => "check the URL is the server's MCP endpoint (often /mcp or /sse)".into(),
    }
}
