//! The two protocol eras and the pure rules for telling them apart and translating between
//! them. Nothing here does I/O: the relay feeds it bytes and values and acts on the answers.

pub mod bridge;
pub mod envelope;
pub mod headers;
pub mod listen;
pub mod mrtr;
pub mod paging;
pub mod probe;
pub mod request;
pub mod state_token;
pub mod tasks;
pub mod tools;

/// The modern revision this relay implements.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Modern revisions the relay can speak, oldest first.
pub const MODERN_VERSIONS: &[&str] = &[MODERN_VERSION];
/// Handshake (legacy) revisions the relay accepts in `initialize`, oldest first.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The legacy revision the relay offers when it runs `initialize` itself.
pub const LATEST_LEGACY_VERSION: &str = "2025-11-25";

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Modern error codes (2026-07-28 §4.6).
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Which side of the 2026-07-28 line a peer is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// The `initialize` handshake and sessions (2024-11-05 to 2025-11-25).
    Legacy,
    /// Stateless, per-request `_meta` (2026-07-28 and later).
    Modern,
}

impl Era {
    pub fn name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Revision strings are ISO dates; the SDKs call a version modern by plain comparison.
pub fn is_modern_version(version: &str) -> bool {
    version >= MODERN_VERSION
}

/// The relay's own name and version, as `Implementation`.
pub fn relay_info() -> serde_json::Value {
    serde_json::json!({"name": "mcp-stdio", "version": env!("CARGO_PKG_VERSION")})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_dates() {
        assert!(is_modern_version("2026-07-28"));
        assert!(is_modern_version("2027-01-01"));
        assert!(!is_modern_version("2025-11-25"));
    }
}
