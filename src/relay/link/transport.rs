//! `--transport`: Streamable HTTP, the 2024-11-05 HTTP+SSE transport, or `auto` (Streamable
//! HTTP first, HTTP+SSE when the first POST is refused with 400, 404 or 405 and a GET to
//! the same URL opens a stream that names an `endpoint`). Decided once per process.

use std::sync::OnceLock;

use crate::relay::config::TransportChoice;

/// What the relay uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    StreamableHttp,
    Sse,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::StreamableHttp => "Streamable HTTP",
            Transport::Sse => "HTTP+SSE (2024-11-05)",
        }
    }
}

/// The decision, made at most once.
pub struct Transports {
    decided: OnceLock<Transport>,
}

impl Transports {
    pub fn new(choice: TransportChoice) -> Self {
        let decided = OnceLock::new();
        match choice {
            TransportChoice::StreamableHttp => {
                let _ = decided.set(Transport::StreamableHttp);
            }
            TransportChoice::Sse => {
                let _ = decided.set(Transport::Sse);
            }
            TransportChoice::Auto => {}
        }
        Self { decided }
    }

    /// The transport, if decided.
    pub fn decided(&self) -> Option<Transport> {
        self.decided.get().copied()
    }

    pub fn is_sse(&self) -> bool {
        self.decided() == Some(Transport::Sse)
    }

    /// Settles `auto` (the first evidence wins; later calls change nothing) and logs it.
    pub fn decide(&self, transport: Transport, why: &str) {
        if self.decided.set(transport).is_ok() {
            tracing::info!(transport = transport.name(), "transport chosen: {why}");
        }
    }

    /// Whether a refused first POST (this status) may mean an HTTP+SSE server.
    pub fn may_fall_back(&self, status: u16) -> bool {
        self.decided().is_none() && matches!(status, 400 | 404 | 405)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_400_404_405_before_a_decision_are_fallback_evidence() {
        let auto = Transports::new(TransportChoice::Auto);
        for status in [400, 404, 405] {
            assert!(auto.may_fall_back(status));
        }
        for status in [401, 403, 406, 415, 500, 502, 503] {
            assert!(!auto.may_fall_back(status), "{status}");
        }
        auto.decide(Transport::StreamableHttp, "test");
        assert!(!auto.may_fall_back(404));
        auto.decide(Transport::Sse, "later evidence changes nothing");
        assert_eq!(auto.decided(), Some(Transport::StreamableHttp));
        assert!(Transports::new(TransportChoice::Sse).is_sse());
        assert!(!Transports::new(TransportChoice::StreamableHttp).may_fall_back(404));
    }
}
