//! The standalone GET stream: server-initiated requests and notifications that belong to
//! no request of the host's, kept open (and resumed) for the life of the session.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::StreamExt;
use http::StatusCode;

use super::Link;
use crate::http::sse::{self, describe_body_error};
use crate::relay::route::route;

/// Runs until the upstream says it has no such stream (405), the session is replaced
/// (a newer one gets its own stream), or too many consecutive attempts fail.
pub async fn run(link: Arc<Link>) {
    let generation = link.upstream.generation();
    let mut last_event_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut failures = 0;
    let mut backoff = fresh_backoff();
    loop {
        if link.upstream.generation() != generation {
            return;
        }
        let mut delivered = false;
        match link.upstream.get(last_event_id.as_deref(), true).await {
            Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!(
                    "upstream offers no standalone stream for server-initiated messages (405)"
                );
                return;
            }
            Ok(response) if response.status() == StatusCode::NOT_FOUND => {
                tracing::debug!("upstream session ended; the next request will re-initialize");
                return;
            }
            Ok(response) if response.status().is_success() => {
                let mut events = sse::events(response, link.upstream.max_message_size());
                while let Some(event) = events.next().await {
                    match event {
                        Ok(event) => {
                            if event.id.is_some() {
                                last_event_id = event.id;
                            }
                            if let Some(ms) = event.retry_ms {
                                retry = Some(Duration::from_millis(ms));
                            }
                            if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                                route(&link.gate, data.as_bytes(), None).await;
                            }
                            delivered = true;
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "the server stream broke; reconnecting");
                            break;
                        }
                    }
                }
            }
            Ok(response) => {
                tracing::debug!(status = %response.status(), "the server stream was refused")
            }
            Err(e) => {
                tracing::debug!(error = %describe_body_error(&e), "could not open the server stream")
            }
        }
        if delivered {
            failures = 0;
            backoff = fresh_backoff();
        } else {
            failures += 1;
            if failures > link.max_reconnects {
                tracing::warn!(
                    attempts = failures,
                    "gave up on the upstream's stream for server-initiated messages"
                );
                return;
            }
        }
        let delay = retry.unwrap_or_else(|| backoff.next().unwrap_or(Duration::from_secs(30)));
        tokio::time::sleep(delay).await;
    }
}

fn fresh_backoff() -> impl Iterator<Item = Duration> {
    reconnect_backoff(Duration::from_secs(1))
}

/// Delays between reconnection attempts: from `first`, doubling to 30 s, with jitter.
pub fn reconnect_backoff(first: Duration) -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(first)
        .with_max_delay(Duration::from_secs(30))
        .with_jitter()
        .without_max_times()
        .build()
}
