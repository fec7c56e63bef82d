//! Which protocol era the stdio server speaks, learnt once per gateway (one command line)
//! from a disposable sibling process: some handshake-era servers exit on an unknown first
//! request, and a dual-era server locks its era on its first request, so probing the child
//! that will serve would either kill it or lock it.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::child::{Child, Output};
use crate::era::probe::{Verdict, classify};
use crate::era::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, MODERN_VERSION, relay_info,
};

/// The era the gateway talks to its children in.
#[derive(Debug, Clone)]
pub enum ChildEra {
    /// 2026-07-28: requests keep their envelope, `server/discover` and `input_required`
    /// are the child's own.
    Modern,
    /// The handshake era: the gateway runs `initialize` and translates.
    Legacy,
}

/// `--child-era`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEraChoice {
    Auto,
    Legacy,
    Modern,
}

const PROBE_ID: &str = "mcp-stdio-era-probe";

/// Starts a sibling of the child, asks it `server/discover`, and judges the answer by the
/// evidence §4.15 names: a DiscoverResult sharing a modern version, or a recognised modern
/// error, means modern; anything else (an error, silence past `timeout`, an exit) legacy.
pub async fn probe(
    command: &super::child::ChildCommand,
    max_line: usize,
    timeout: Duration,
) -> ChildEra {
    let (tx, mut rx) = mpsc::channel(16);
    let child = match Child::spawn(command, "era-probe", max_line, 8, tx) {
        Ok(child) => child,
        Err(e) => {
            tracing::warn!(
                "the era probe could not start the server ({e}); assuming the handshake era"
            );
            return ChildEra::Legacy;
        }
    };
    let request = json!({"jsonrpc": "2.0", "id": PROBE_ID, "method": "server/discover", "params": {"_meta": {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: relay_info(),
    }}});
    let _ = child.stdin.send(request.to_string().into()).await;
    let answer = tokio::time::timeout(timeout, async {
        while let Some(output) = rx.recv().await {
            let Output::Line(line) = output else { continue };
            let Ok(value) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if value.get("id").and_then(Value::as_str) == Some(PROBE_ID) {
                return Some(line);
            }
        }
        None
    })
    .await;
    let grace = Duration::from_millis(500);
    tokio::spawn(child.terminate(grace));
    let era = match answer {
        Ok(Some(line)) => match classify(200, Some(&line), MODERN_VERSION) {
            Verdict::Modern { .. } => ChildEra::Modern,
            _ => ChildEra::Legacy,
        },
        Ok(None) => ChildEra::Legacy,
        Err(_) => {
            tracing::info!(
                timeout_s = timeout.as_secs_f64(),
                "the server did not answer server/discover in time (--child-probe-timeout); treating it as handshake-era"
            );
            ChildEra::Legacy
        }
    };
    tracing::info!(era = ?era, "the stdio server's protocol era");
    era
}
