//! The probe's own small MCP client: one request at a time over whichever transport the
//! server turned out to speak (Streamable HTTP in either era, or the 2024-11-05 HTTP+SSE
//! stream), each exchange timed. It reads answers the way the relay does
//! (`read_first_answer`), but it never relays anything: what it learns goes into a report.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use serde_json::{Map, Value, json};
use url::Url;

use super::frames::{envelope, initialize_request, insert};
use crate::era::{self, MODERN_VERSION};
use crate::http::client::HttpClient;
use crate::http::response::{HttpError, Response};
use crate::http::sse::{self, EventStream, root_cause};
use crate::oauth::presented::{Presented, ServerNonce};
use crate::relay::link::response::{is_event_stream, read_first_answer};

/// Where requests go and how they are framed, once the server's speech is known.
pub enum Transport {
    /// Nothing decided yet (the first POSTs).
    Unknown,
    /// Streamable HTTP, handshake era: the session id once `initialize` gave one.
    Session {
        id: Option<HeaderValue>,
        version: String,
    },
    /// Streamable HTTP, 2026-07-28: every request carries the envelope.
    Modern { version: String },
    /// HTTP+SSE: POSTs go to the endpoint, answers come on the stream.
    Sse { endpoint: Uri, events: EventStream },
}

/// One timed exchange, as the report lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    pub step: String,
    /// The HTTP status, when a response came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub ms: f64,
}

/// What one POST brought back.
pub struct Posted {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The JSON-RPC answer, when the body held one.
    pub answer: Option<Value>,
    /// What the body was instead (its media type), when it held none.
    pub content_type: Option<String>,
}

/// Why an exchange brought no usable answer.
#[derive(Debug)]
pub enum WireError {
    /// Nothing came back from the network (refused, timed out, TLS).
    Network(String),
    /// A response came, but not what MCP would send.
    Protocol(String),
}

impl WireError {
    pub fn message(&self) -> &str {
        match self {
            WireError::Network(m) | WireError::Protocol(m) => m,
        }
    }
}

pub struct Wire {
    pub url: Url,
    uri: Uri,
    client: HttpClient,
    pub transport: Transport,
    /// The login requests present, once one is known to be needed.
    pub authorization: Option<Presented>,
    /// The server's latest DPoP nonce, for the next proof of a bound token.
    dpop_nonce: ServerNonce,
    /// `-H` headers, sent with every request.
    extra: HeaderMap,
    read_timeout: Duration,
    max_message_size: usize,
    next_id: u64,
    pub steps: Vec<Step>,
}

impl Wire {
    pub fn new(
        url: Url,
        client: HttpClient,
        extra: HeaderMap,
        read_timeout: Duration,
        max_message_size: usize,
    ) -> Result<Self, String> {
        let uri: Uri = url
            .as_str()
            .parse()
            .map_err(|e| format!("the URL cannot be requested: {e}"))?;
        Ok(Wire {
            url,
            uri,
            client,
            transport: Transport::Unknown,
            authorization: None,
            dpop_nonce: ServerNonce::default(),
            extra,
            read_timeout,
            max_message_size,
            next_id: 0,
            steps: Vec::new(),
        })
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = self.extra.clone();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers
    }

    /// Puts the login, with a DPoP proof for `method` on `uri` when it is bound, into
    /// `headers`.
    fn stamp(&self, headers: &mut HeaderMap, method: &str, uri: &Uri) {
        if let Some(presented) = &self.authorization {
            self.dpop_nonce.stamp(presented, headers, method, uri);
        }
    }

    /// Keeps the DPoP nonce an answer carries; true when it asked for it.
    fn asks_for_nonce(&self, response: &Response) -> bool {
        self.authorization.as_ref().is_some_and(|presented| {
            let status = response.status().as_u16();
            self.dpop_nonce.note(presented, status, response.headers())
        })
    }

    /// `server/discover` with the 2026-07-28 envelope: the era probe the relay makes.
    pub async fn discover(&mut self) -> Result<Posted, WireError> {
        let id = self.id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "server/discover",
            "params": {"_meta": envelope(MODERN_VERSION)}});
        let mut headers = self.headers();
        for (name, value) in era::headers::standard_named(MODERN_VERSION, "server/discover", None)
            .map_err(WireError::Protocol)?
        {
            insert(&mut headers, name, &value);
        }
        self.post(&self.uri.clone(), "server/discover", headers, &body)
            .await
    }

    /// `initialize` at the newest handshake revision, on the URL itself.
    pub async fn initialize(&mut self) -> Result<Posted, WireError> {
        let id = self.id();
        let body = initialize_request(id);
        let headers = self.headers();
        self.post(&self.uri.clone(), "initialize", headers, &body)
            .await
    }

    /// Opens the 2024-11-05 stream with a GET and waits for its `endpoint` event; on
    /// success the transport is HTTP+SSE and `initialize` has been answered over it.
    pub async fn open_sse(&mut self) -> Result<Value, WireError> {
        let started = Instant::now();
        let mut headers = self.extra.clone();
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        self.stamp(&mut headers, "GET", &self.uri);
        let sent = self
            .client
            .send(
                Method::GET,
                &self.uri,
                headers,
                Bytes::new(),
                Some(self.read_timeout),
            )
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                self.note("GET (HTTP+SSE stream)", None, started);
                return Err(network(&e));
            }
        };
        let status = response.status();
        self.note("GET (HTTP+SSE stream)", Some(status.as_u16()), started);
        if !status.is_success() || !is_event_stream(&response) {
            return Err(WireError::Protocol(format!(
                "the GET for an HTTP+SSE stream got HTTP {status} {}",
                media_type(response.headers()).unwrap_or_default()
            )));
        }
        let mut events = sse::events(response, self.max_message_size);
        let endpoint = loop {
            let next = tokio::time::timeout(self.read_timeout, events.next()).await;
            match next {
                Ok(Some(Ok(event))) if event.event.as_deref() == Some("endpoint") => {
                    break event.data.unwrap_or_default();
                }
                Ok(Some(Ok(_))) => continue,
                Ok(Some(Err(e))) => return Err(WireError::Protocol(e.to_string())),
                Ok(None) => {
                    return Err(WireError::Protocol(
                        "the HTTP+SSE stream ended before it named an endpoint".into(),
                    ));
                }
                Err(_) => {
                    return Err(WireError::Protocol(format!(
                        "the event stream named no endpoint within {} s (--timeout-read)",
                        self.read_timeout.as_secs_f64()
                    )));
                }
            }
        };
        let endpoint = self
            .url
            .join(endpoint.trim())
            .ok()
            .filter(|joined| joined.origin() == self.url.origin())
            .and_then(|joined| joined.as_str().parse::<Uri>().ok())
            .ok_or_else(|| {
                WireError::Protocol(format!(
                    "the HTTP+SSE endpoint {endpoint:?} is not a URL on the server's origin"
                ))
            })?;
        self.transport = Transport::Sse { endpoint, events };
        let id = self.id();
        self.request_with_id(id, "initialize", initialize_request(id))
            .await
    }

    /// A request on the decided transport; returns its answer (`result` or `error`).
    pub async fn request(
        &mut self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Value, WireError> {
        let id = self.id();
        let mut params = params;
        if let Transport::Modern { version } = &self.transport {
            let mut meta = match params.remove("_meta") {
                Some(Value::Object(meta)) => meta,
                _ => Map::new(),
            };
            meta.extend(envelope(version).as_object().cloned().unwrap_or_default());
            params.insert("_meta".into(), Value::Object(meta));
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.request_with_id(id, method, body).await
    }

    async fn request_with_id(
        &mut self,
        id: u64,
        method: &str,
        body: Value,
    ) -> Result<Value, WireError> {
        let mut headers = self.headers();
        match &self.transport {
            Transport::Unknown => {}
            Transport::Session {
                id: session,
                version,
            } => {
                if let Some(session) = session {
                    headers.insert("mcp-session-id", session.clone());
                }
                insert(&mut headers, "mcp-protocol-version", version);
            }
            Transport::Modern { version } => {
                let version = version.clone();
                for (name, value) in era::headers::standard_named(&version, method, None)
                    .map_err(WireError::Protocol)?
                {
                    insert(&mut headers, name, &value);
                }
            }
            Transport::Sse { endpoint, .. } => {
                let endpoint = endpoint.clone();
                let started = Instant::now();
                let posted = self.post(&endpoint, method, headers, &body).await?;
                if !posted.status.is_success() {
                    return Err(WireError::Protocol(format!(
                        "the HTTP+SSE endpoint refused {method} with HTTP {}",
                        posted.status
                    )));
                }
                let answer = match posted.answer {
                    Some(answer) => answer,
                    None => self.answer_on_stream(id).await?,
                };
                // The POST's step holds the HTTP status; this one the whole round trip.
                self.note(&format!("{method} (answer on the stream)"), None, started);
                return Ok(answer);
            }
        }
        let uri = self.uri.clone();
        let posted = self.post(&uri, method, headers, &body).await?;
        match posted.answer {
            Some(answer) => Ok(answer),
            None => Err(WireError::Protocol(format!(
                "{method} got HTTP {} {} without a JSON-RPC answer",
                posted.status,
                posted.content_type.unwrap_or_default()
            ))),
        }
    }

    /// A notification on the decided transport (`notifications/initialized`).
    pub async fn notify(&mut self, method: &str) {
        let body = json!({"jsonrpc": "2.0", "method": method});
        let mut headers = self.headers();
        let target = match &self.transport {
            Transport::Session { id, version } => {
                if let Some(id) = id {
                    headers.insert("mcp-session-id", id.clone());
                }
                insert(&mut headers, "mcp-protocol-version", version);
                self.uri.clone()
            }
            Transport::Sse { endpoint, .. } => endpoint.clone(),
            Transport::Unknown | Transport::Modern { .. } => return,
        };
        let _ = self.post(&target, method, headers, &body).await;
    }

    /// Ends a handshake-era Streamable HTTP session (the relay does the same at exit).
    pub async fn end_session(&mut self) {
        let Transport::Session {
            id: Some(id),
            version,
        } = &self.transport
        else {
            return;
        };
        let mut headers = self.extra.clone();
        headers.insert("mcp-session-id", id.clone());
        insert(&mut headers, "mcp-protocol-version", version);
        self.stamp(&mut headers, "DELETE", &self.uri);
        let started = Instant::now();
        let sent = self
            .client
            .send(
                Method::DELETE,
                &self.uri,
                headers,
                Bytes::new(),
                Some(self.read_timeout),
            )
            .await;
        self.note(
            "DELETE (end the session)",
            sent.ok().map(|r| r.status().as_u16()),
            started,
        );
    }

    async fn answer_on_stream(&mut self, id: u64) -> Result<Value, WireError> {
        let Transport::Sse { events, .. } = &mut self.transport else {
            return Err(WireError::Protocol("no HTTP+SSE stream is open".into()));
        };
        let deadline = tokio::time::Instant::now() + self.read_timeout;
        loop {
            let next = tokio::time::timeout_at(deadline, events.next()).await;
            let event = match next {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(e))) => return Err(WireError::Protocol(e.to_string())),
                Ok(None) => {
                    return Err(WireError::Protocol(
                        "the HTTP+SSE stream ended before the answer came".into(),
                    ));
                }
                Err(_) => {
                    return Err(WireError::Protocol(format!(
                        "no answer on the HTTP+SSE stream within {} s (--timeout-read)",
                        self.read_timeout.as_secs_f64()
                    )));
                }
            };
            let Some(value) = event
                .data
                .and_then(|d| serde_json::from_str::<Value>(&d).ok())
            else {
                continue;
            };
            if value.get("id").and_then(Value::as_u64) == Some(id)
                && (value.get("result").is_some() || value.get("error").is_some())
            {
                return Ok(value);
            }
        }
    }

    /// One POST, timed and noted; the answer read from JSON or SSE.
    async fn post(
        &mut self,
        target: &Uri,
        step: &str,
        headers: HeaderMap,
        body: &Value,
    ) -> Result<Posted, WireError> {
        let started = Instant::now();
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON serializes"));
        let mut nonce_retried = false;
        let response: Response = loop {
            let mut headers = headers.clone();
            self.stamp(&mut headers, "POST", target);
            let sent = self
                .client
                .send(
                    Method::POST,
                    target,
                    headers,
                    bytes.clone(),
                    Some(self.read_timeout),
                )
                .await;
            // Every answer may carry the server's next DPoP nonce; this keeps it.
            let wants_nonce = matches!(&sent, Ok(response) if self.asks_for_nonce(response));
            match sent {
                // A bound token's proof lacked the nonce the server now wants: once more.
                Ok(_) if wants_nonce && !nonce_retried => {
                    nonce_retried = true;
                }
                Ok(response) => break response,
                Err(e) => {
                    self.note(step, None, started);
                    return Err(network(&e));
                }
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let content_type = media_type(&headers);
        let read = read_first_answer(response, self.max_message_size).await;
        self.note(step, Some(status.as_u16()), started);
        let answer = read
            .ok()
            .and_then(|body| serde_json::from_slice::<Value>(&body).ok())
            .filter(|v| {
                v.get("jsonrpc").is_some()
                    && (v.get("result").is_some() || v.get("error").is_some())
            });
        Ok(Posted {
            status,
            headers,
            answer,
            content_type,
        })
    }

    pub(super) fn note(&mut self, step: &str, status: Option<u16>, started: Instant) {
        self.steps.push(Step {
            step: step.to_owned(),
            status,
            ms: (started.elapsed().as_secs_f64() * 1000.0 * 100.0).round() / 100.0,
        });
    }
}

fn media_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_owned())
}

fn network(e: &HttpError) -> WireError {
    let why = root_cause(e);
    if e.is_timeout() {
        return WireError::Network(format!("no answer within the timeout ({why})"));
    }
    WireError::Network(why)
}
