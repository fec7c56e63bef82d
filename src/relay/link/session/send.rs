//! Sending on the upstream: POST with retries (connection failures, 429/503 with
//! `Retry-After` up to its cap, failures after sending for methods safe to repeat), a
//! refused token refreshed and an insufficient scope stepped up once, and the GET stream
//! request. What a session adds to each request is the parent's.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use bytes::Bytes;
use http::HeaderMap;
use http::header::{CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use http::{Method, StatusCode, Uri};

use super::{ACCEPT_BOTH, ACCEPT_SSE, LAST_EVENT_ID, Posted, SESSION_ID, Upstream, Wire};
use crate::http::response::{ErrorKind, HttpError, Response};
use crate::http::sse::root_cause;
use crate::oauth::challenge::{self, Challenge};
use crate::oauth::presented::Presented;
use crate::relay::gate::Failure;
use crate::relay::link::response::requested_delay;

/// Why a refusal is worth one more try with a fresh token, each at most once per request.
enum Reauthorize {
    /// 401: refresh the token, or log in.
    Refused(Option<Challenge>),
    /// 403 `insufficient_scope`: log in for the union of scopes.
    Scope(Challenge),
}

fn reauthorize(response: &Response, reauthorized: bool, stepped_up: bool) -> Option<Reauthorize> {
    let challenge = || {
        challenge::bearer(
            response
                .headers()
                .get_all(WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        )
    };
    match response.status() {
        StatusCode::UNAUTHORIZED if !reauthorized => Some(Reauthorize::Refused(challenge())),
        StatusCode::FORBIDDEN if !stepped_up => challenge()
            .filter(|c| c.error.as_deref() == Some("insufficient_scope"))
            .map(Reauthorize::Scope),
        _ => None,
    }
}

impl Upstream {
    /// POSTs one message. Retries when the request provably was not sent (connection
    /// failures), on 429/503 honouring Retry-After up to the cap, and, for methods that
    /// are safe to repeat (`replay_safe`), on failures after sending. Any other outcome is
    /// returned as is.
    pub async fn post(
        &self,
        body: Bytes,
        is_initialize: bool,
        replay_safe: bool,
    ) -> Result<Posted, Failure> {
        let wire = Wire::Legacy {
            initialize: is_initialize,
        };
        self.post_as(body, &wire, replay_safe).await
    }

    /// [`Upstream::post`] with the framing chosen by the caller.
    pub async fn post_as(
        &self,
        body: Bytes,
        wire: &Wire<'_>,
        replay_safe: bool,
    ) -> Result<Posted, Failure> {
        self.post_to(&self.uri, body, wire, replay_safe).await
    }

    /// [`Upstream::post_as`] to `target` instead of the server URL: the 2024-11-05
    /// transport POSTs to the endpoint its stream named.
    pub async fn post_to(
        &self,
        target: &Uri,
        body: Bytes,
        wire: &Wire<'_>,
        replay_safe: bool,
    ) -> Result<Posted, Failure> {
        let read_timeout = match wire {
            Wire::Modern {
                long_lived: true, ..
            } => self.stream_read_timeout,
            _ => Some(self.read_timeout),
        };
        let mut backoff = retry_backoff(self.max_retries);
        let mut attempt = 0;
        // The host's trace context (`params._meta`, SEP-414) continues upstream as headers
        // too, for the proxies and servers that read only those.
        let (trace, body) = upstream_trace(body);
        let mut authorization = self.current_authorization().await;
        let mut reauthorized = false;
        let mut stepped_up = false;
        let mut nonce_retried = false;
        loop {
            let (mut headers, generation, carried_session) = self.post_headers(wire);
            if let Some(presented) = &authorization {
                self.stamp(presented, &mut headers, "POST", target);
            }
            for (name, value) in trace.iter().flat_map(|t| t.headers()) {
                if let Ok(value) = http::HeaderValue::from_str(value) {
                    headers.insert(name, value);
                }
            }
            let sent = self
                .client
                .send(Method::POST, target, headers, body.clone(), read_timeout)
                .await;
            let retries_left = attempt < self.max_retries;
            attempt += 1;
            // Every answer may carry the server's next DPoP nonce; this keeps it.
            let wants_nonce =
                matches!(&sent, Ok(r) if self.asks_for_nonce(authorization.as_ref(), r));
            match sent {
                // A DPoP proof without the nonce the server now wants: the same token
                // again, with a proof that carries it, once per token (RFC 9449 §9).
                Ok(_) if wants_nonce && !nonce_retried => {
                    nonce_retried = true;
                    attempt -= 1;
                }
                // Asked again at once: a refusal of the proof, not of the token, so no
                // refresh or login; the host gets the server's answer.
                Ok(response) if wants_nonce => {
                    return Ok(Posted {
                        response,
                        generation,
                        carried_session,
                    });
                }
                // A refused token: refresh it (or log in) once, then send again; not enough
                // scope: log in again for the union of scopes (step-up), once. The request
                // was not executed, so this is safe for any method and costs no retry.
                Ok(response)
                    if self.auth.is_some()
                        && let Some(why) = reauthorize(&response, reauthorized, stepped_up) =>
                {
                    match why {
                        Reauthorize::Refused(_) => reauthorized = true,
                        Reauthorize::Scope(_) => stepped_up = true,
                    }
                    attempt -= 1;
                    authorization = Some(
                        self.fresh_authorization(why, authorization.as_ref())
                            .await?,
                    );
                    nonce_retried = false; // a new token may need its own nonce retry
                }
                // Busy: wait as asked (up to the cap; beyond it the answer goes to the host).
                Ok(response)
                    if is_rate_limited(response.status())
                        && retries_left
                        && let Some(delay) = self.busy_delay(&response, &mut backoff) =>
                {
                    tracing::info!(status = %response.status(), ?delay, "upstream is busy; retrying");
                    tokio::time::sleep(delay).await;
                }
                Ok(response) => {
                    return Ok(Posted {
                        response,
                        generation,
                        carried_session,
                    });
                }
                Err(e) if retries_left && (e.is_connect() || replay_safe) => {
                    let delay = backoff.next().unwrap_or(Duration::from_secs(1));
                    tracing::info!(error = %root_cause(&e), ?delay, "upstream request failed; retrying");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(self.send_failure(&e, attempt, replay_safe)),
            }
        }
    }

    /// How long to wait before trying a busy server again: its `Retry-After`, else the
    /// next backoff step; `None` when it asks for longer than `--retry-after-max`.
    fn busy_delay(
        &self,
        response: &Response,
        backoff: &mut impl Iterator<Item = Duration>,
    ) -> Option<Duration> {
        match requested_delay(response) {
            Some(delay) if delay > self.retry_after_cap => None,
            Some(delay) => Some(delay),
            None => Some(backoff.next().unwrap_or(Duration::from_secs(1))),
        }
    }

    /// A POST's headers for `wire`, the session generation they carry, and whether they
    /// carry the session id.
    fn post_headers(&self, wire: &Wire<'_>) -> (HeaderMap, u64, bool) {
        match wire {
            Wire::Legacy { initialize } => self.headers(ACCEPT_BOTH, !initialize),
            Wire::Modern { headers: extra, .. } => {
                let (mut headers, generation, _) = self.headers(ACCEPT_BOTH, false);
                // Never a session id on a stateless request, even one given with -H.
                headers.remove(SESSION_ID);
                for (name, value) in extra.iter() {
                    headers.insert(name, value.clone());
                }
                (headers, generation, false)
            }
        }
    }

    /// Whether the answer to a request that presented `sent` asks for a (new) DPoP nonce;
    /// any nonce it carries is kept for the next proof.
    fn asks_for_nonce(&self, sent: Option<&Presented>, response: &Response) -> bool {
        match (&self.auth, sent) {
            (Some(auth), Some(sent)) => {
                auth.note_answer(sent, response.status().as_u16(), response.headers())
            }
            _ => false,
        }
    }

    /// A new login to present after a refusal worth one more try.
    async fn fresh_authorization(
        &self,
        why: Reauthorize,
        sent: Option<&Presented>,
    ) -> Result<Presented, Failure> {
        let auth = self.auth.as_ref().expect("only with a login to renew");
        let (fresh, status) = match why {
            Reauthorize::Refused(challenge) => {
                (auth.after_unauthorized(sent, challenge).await, 401)
            }
            Reauthorize::Scope(challenge) => {
                (auth.after_insufficient_scope(sent, challenge).await, 403)
            }
        };
        fresh.map_err(|e| Failure::upstream(e).with_data(serde_json::json!({"httpStatus": status})))
    }

    fn send_failure(&self, e: &HttpError, attempts: u32, replay_safe: bool) -> Failure {
        let cause = root_cause(e);
        if e.kind() == ErrorKind::ConnectTimeout {
            return Failure::upstream(format!(
                "cannot connect to the upstream {}: no connection within {} s (--timeout-connect), {attempts} attempt(s)",
                self.display_url(),
                seconds(self.connect_timeout)
            ));
        }
        if e.is_connect() {
            return Failure::upstream(format!(
                "cannot connect to the upstream {} after {attempts} attempt(s): {cause}",
                self.display_url()
            ));
        }
        let what = if e.is_timeout() {
            format!(
                "no response within {} s (--timeout-read)",
                seconds(self.read_timeout)
            )
        } else {
            format!("upstream connection failed after the request was sent: {cause}")
        };
        if replay_safe {
            Failure::upstream(format!("{what} (after {attempts} attempt(s))"))
        } else {
            Failure::upstream(format!(
                "{what}; not retried because the request may have executed"
            ))
        }
    }

    /// Opens (or resumes, with `last_event_id`) a GET stream on the session.
    pub async fn get(
        &self,
        last_event_id: Option<&str>,
        long_lived: bool,
    ) -> Result<Response, HttpError> {
        let (mut headers, _, _) = self.headers(ACCEPT_SSE, true);
        let presented = self.current_authorization().await;
        if let Some(presented) = &presented {
            self.stamp(presented, &mut headers, "GET", &self.uri);
        }
        headers.remove(CONTENT_TYPE);
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(LAST_EVENT_ID, id);
        }
        let read_timeout = if long_lived {
            self.stream_read_timeout
        } else {
            Some(self.read_timeout)
        };
        let opened = self
            .client
            .send(Method::GET, &self.uri, headers, Bytes::new(), read_timeout)
            .await;
        if let (Ok(response), Some(presented)) = (&opened, &presented) {
            self.asks_for_nonce(Some(presented), response); // keeps the server's next nonce
        }
        opened
    }
}

/// Seconds as a person writes them: "120", "0.5".
fn seconds(duration: Duration) -> String {
    let s = duration.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

fn retry_backoff(max_retries: u32) -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(8))
        .with_jitter()
        .with_max_times(max_retries as usize)
        .build()
}

fn is_rate_limited(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
}

/// The trace context a request goes upstream with, and the request: the host's, or, with
/// OpenTelemetry on, the relay's span as the server's parent, in the headers and in
/// `_meta` alike.
fn upstream_trace(body: Bytes) -> (Option<crate::trace_context::TraceContext>, Bytes) {
    let incoming = crate::trace_context::TraceContext::in_message(&body);
    match crate::telemetry::outgoing(incoming.as_ref()) {
        Some(ours) => {
            let spliced = crate::jsonrpc::message::parse(&body)
                .ok()
                .and_then(|parsed| crate::trace_context::with_trace(&body, parsed.params, &ours));
            (Some(ours), spliced.unwrap_or(body))
        }
        None => (incoming, body),
    }
}
