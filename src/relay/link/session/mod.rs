//! The Streamable HTTP upstream (revisions 2025-03-26 to 2025-11-25): session state, the
//! headers a request carries, what `initialize` establishes, re-initialization and DELETE.
//! Sending (POST with retries and the OAuth refresh, GET) is in `send`.

mod send;

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use url::Url;

use super::response::read_first_answer;
use crate::era::headers::is_visible_ascii;
use crate::http::client::HttpClient;
use crate::http::response::{HttpError, Response};
use crate::http::sse::root_cause;
use crate::jsonrpc::message;
use crate::oauth::presented::Presented;
use crate::oauth::provider::TokenProvider;
use crate::relay::config::RelayConfig;
use crate::relay::gate::Failure;

pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

pub(super) const ACCEPT_BOTH: HeaderValue =
    HeaderValue::from_static("application/json, text/event-stream");
const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// What the upstream told us at initialization, and what we need to do it again.
#[derive(Default)]
struct Session {
    id: Option<HeaderValue>,
    protocol_version: Option<HeaderValue>,
    /// Bumped on every (re)initialization, so concurrent 404s re-initialize only once.
    generation: u64,
    /// `params` of the host's own `initialize`, replayed when the session is lost.
    host_initialize_params: Option<String>,
    reinit_count: u64,
}

/// How a POST is framed: on the legacy session, or as a stateless 2026-07-28 request.
pub enum Wire<'a> {
    /// Session id and negotiated version from the session (none on `initialize`).
    Legacy { initialize: bool },
    /// No session; these headers (`MCP-Protocol-Version`, `Mcp-Method`, …) instead. A
    /// long-lived request (`subscriptions/listen`) reads under `--sse-read-timeout`.
    Modern {
        headers: &'a HeaderMap,
        long_lived: bool,
    },
}

/// A response plus what was true of the session when the request was sent.
pub struct Posted {
    pub response: Response,
    pub generation: u64,
    pub carried_session: bool,
}

pub struct Upstream {
    url: Url,
    /// The same URL in the form requests take (parsed once, not per request).
    uri: Uri,
    base_headers: HeaderMap,
    client: HttpClient,
    /// OAuth tokens for the requests, when the server uses OAuth.
    auth: Option<TokenProvider>,
    /// `--sse-read-timeout`, for the long-lived GET stream; `None` disables it.
    stream_read_timeout: Option<Duration>,
    connect_timeout: Duration,
    max_retries: u32,
    retry_after_cap: Duration,
    max_message_size: usize,
    read_timeout: Duration,
    session: Mutex<Session>,
    reinit: tokio::sync::Mutex<()>,
}

impl Upstream {
    pub fn new(config: &RelayConfig) -> Result<Self, String> {
        let uri: Uri = config
            .url
            .as_str()
            .parse()
            .map_err(|e| format!("the upstream URL cannot be used for HTTP requests: {e}"))?;
        let client = HttpClient::build(&config.client, &uri)?;
        let auth = match &config.oauth {
            Some(oauth) => Some(TokenProvider::for_server(
                oauth,
                &config.client,
                config.max_message_size,
                &config.url,
            )?),
            None => None,
        };
        Ok(Self {
            auth,
            url: config.url.clone(),
            uri,
            base_headers: config.headers.clone(),
            client,
            stream_read_timeout: config.sse_read_timeout,
            connect_timeout: config.client.connect_timeout,
            max_retries: config.max_retries,
            retry_after_cap: config.retry_after_cap,
            max_message_size: config.max_message_size,
            read_timeout: config.client.read_timeout.unwrap_or(Duration::MAX),
            session: Mutex::new(Session::default()),
            reinit: tokio::sync::Mutex::new(()),
        })
    }

    /// The URL as it may appear in logs: no userinfo, no query (either can hold secrets).
    pub fn display_url(&self) -> String {
        let mut shown = format!(
            "{}{}",
            self.url.origin().ascii_serialization(),
            self.url.path()
        );
        if self.url.query().is_some() {
            shown.push_str("?<redacted>");
        }
        shown
    }

    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    pub fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    pub fn generation(&self) -> u64 {
        self.session.lock().expect("session lock").generation
    }

    /// The protocol version the upstream's `initialize` answer negotiated, once there was one.
    pub fn protocol_version(&self) -> Option<String> {
        let session = self.session.lock().expect("session lock");
        session
            .protocol_version
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    pub fn has_session(&self) -> bool {
        self.session.lock().expect("session lock").id.is_some()
    }

    /// The host's `initialize` parameters (raw JSON), once it sent them.
    pub fn host_initialize_params(&self) -> Option<String> {
        self.session
            .lock()
            .expect("session lock")
            .host_initialize_params
            .clone()
    }

    /// Keeps the host's `initialize` parameters for replay after a lost session.
    pub fn remember_host_initialize(&self, params: Option<&serde_json::value::RawValue>) {
        let params = params.map_or_else(|| "{}".to_owned(), |p| p.get().to_owned());
        self.session
            .lock()
            .expect("session lock")
            .host_initialize_params = Some(params);
    }

    /// How the next request presents the OAuth login, if the server uses OAuth and a
    /// login exists.
    async fn current_authorization(&self) -> Option<Presented> {
        match &self.auth {
            Some(auth) => auth.authorization().await,
            None => None,
        }
    }

    /// Puts the login into a request's headers (with its DPoP proof when bound).
    fn stamp(&self, presented: &Presented, headers: &mut HeaderMap, method: &str, uri: &Uri) {
        if let Some(auth) = &self.auth {
            auth.stamp(presented, headers, method, uri);
        }
    }

    /// Headers for one request: ours, the user's, then the session's.
    fn headers(&self, accept: HeaderValue, with_session: bool) -> (HeaderMap, u64, bool) {
        // Room for everything a request ends up with (these, the 2026-07-28 mirrors,
        // Authorization, and the Host hyper-util adds), so the map never regrows per request.
        let mut headers = HeaderMap::with_capacity(self.base_headers.len() + 10);
        headers.insert(ACCEPT, accept);
        headers.insert(CONTENT_TYPE, JSON);
        for (name, value) in &self.base_headers {
            headers.insert(name, value.clone());
        }
        let session = self.session.lock().expect("session lock");
        let mut carried = false;
        if with_session {
            if let Some(id) = &session.id {
                headers.insert(SESSION_ID, id.clone());
                carried = true;
            }
            if let Some(version) = &session.protocol_version {
                headers.insert(PROTOCOL_VERSION, version.clone());
            }
        }
        (headers, session.generation, carried)
    }

    /// Adopts what an `initialize` answer establishes: the session id (from the response
    /// headers) and the negotiated protocol version (from the result). Values that are not
    /// visible ASCII are refused, so a hostile server cannot inject headers.
    pub fn adopt_initialize(&self, response_headers: &HeaderMap, answer: &[u8]) {
        let version = protocol_version_of(answer);
        let mut session = self.session.lock().expect("session lock");
        session.id = response_headers
            .get(SESSION_ID)
            .filter(|v| is_visible_ascii(v.as_bytes()))
            .cloned();
        session.protocol_version = version.and_then(|v| HeaderValue::from_str(&v).ok());
        session.generation += 1;
        tracing::info!(
            session = session.id.is_some(),
            protocol_version = session
                .protocol_version
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or("unknown"),
            "upstream session established"
        );
    }

    /// Starts a new session after the upstream forgot ours (404): replays the host's own
    /// `initialize` (its real capabilities and clientInfo) and `notifications/initialized`.
    /// Concurrent callers that saw the same lost session share one re-initialization.
    pub async fn reinitialize(&self, lost_generation: u64) -> Result<(), Failure> {
        let _one_at_a_time = self.reinit.lock().await;
        let (params, n) = {
            let mut session = self.session.lock().expect("session lock");
            if session.generation != lost_generation {
                return Ok(());
            }
            session.id = None;
            session.reinit_count += 1;
            (session.host_initialize_params.clone(), session.reinit_count)
        };
        let params = params.ok_or_else(|| {
            Failure::upstream("the upstream session expired, and it cannot be re-established because the host never sent initialize")
        })?;
        tracing::info!("upstream session expired (HTTP 404); re-initializing");
        self.initialize(&format!("mcp-stdio-reinitialize-{n}"), &params)
            .await
            .map(|_| ())
            .map_err(|failure| {
                Failure::upstream(format!(
                    "the upstream session expired and re-initialization failed: {}",
                    failure.message
                ))
            })
    }

    /// Runs the handshake with `params` (the relay's own `initialize`, or the host's
    /// replayed): POSTs it, adopts the session it establishes, sends
    /// `notifications/initialized`, and returns the answer line.
    pub async fn initialize(&self, id: &str, params: &str) -> Result<Vec<u8>, Failure> {
        let id = serde_json::to_string(id).expect("a string serializes");
        let request =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{params}}}"#);
        let posted = self.post(Bytes::from(request), true, true).await?;
        let status = posted.response.status();
        let headers = posted.response.headers().clone();
        let answer = read_first_answer(posted.response, self.max_message_size)
            .await
            .map_err(Failure::upstream)?;
        if !status.is_success() {
            return Err(Failure::upstream(format!("HTTP {status}")));
        }
        let succeeded = message::parse(&answer).is_ok_and(|m| m.result.is_some());
        if !succeeded {
            return Ok(answer);
        }
        self.adopt_initialize(&headers, &answer);
        let initialized =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let posted = self.post(initialized, false, true).await?;
        if !posted.response.status().is_success() {
            tracing::warn!(status = %posted.response.status(), "upstream refused notifications/initialized");
        }
        Ok(answer)
    }

    /// Ends the session politely (the Python tool never does, leaving ghost sessions).
    pub async fn delete_session(&self, timeout: Duration) {
        if !self.has_session() {
            return;
        }
        let (mut headers, _, _) = self.headers(ACCEPT_BOTH, true);
        if let Some(presented) = self.current_authorization().await {
            self.stamp(&presented, &mut headers, "DELETE", &self.uri);
        }
        headers.remove(CONTENT_TYPE);
        let request = self.client.send(
            Method::DELETE,
            &self.uri,
            headers,
            Bytes::new(),
            Some(timeout),
        );
        match tokio::time::timeout(timeout, request)
            .await
            .unwrap_or_else(|_| Err(HttpError::timeout()))
        {
            Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!("upstream does not support session termination (405)");
            }
            Ok(response) => {
                tracing::debug!(status = %response.status(), "upstream session deleted")
            }
            Err(e) => {
                tracing::debug!(error = %root_cause(&e), "could not delete the upstream session")
            }
        }
    }
}

fn protocol_version_of(answer: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<InitResult>,
    }
    #[derive(serde::Deserialize)]
    struct InitResult {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(answer).ok()?;
    answer
        .result?
        .protocol_version
        .filter(|v| is_visible_ascii(v.as_bytes()))
}
