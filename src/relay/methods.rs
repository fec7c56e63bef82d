//! Which methods the relay may send twice without changing what happens upstream.

/// Methods that only read, or that set state idempotently. Anything else, `tools/call`
/// first of all, may have taken effect once the request left, so it is never replayed.
pub fn is_replay_safe(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "prompts/list"
            | "prompts/get"
            | "completion/complete"
            | "logging/setLevel"
            | "server/discover"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_call_is_never_replayed() {
        assert!(!is_replay_safe("tools/call"));
        assert!(!is_replay_safe("some/unknown"));
        assert!(is_replay_safe("tools/list"));
    }
}
