//! A POST at the front door, classified body-first (§4.16): the envelope's version key
//! means 2026-07-28, served statelessly from the principal's pooled backend (or, for a
//! retry of a call parked on another replica, there); anything else goes to the
//! handshake-era session endpoint.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, Method, Request, Response, StatusCode};

use super::body::read_body;
use crate::era::envelope;
use crate::jsonrpc::error::{INVALID_REQUEST, PARSE_ERROR, error_response};
use crate::jsonrpc::message::{self, Message};
use crate::policy::Principal;
use crate::serve::audited;
use crate::serve::cluster::Introduction;
use crate::serve::gateway::Gateway;
use crate::serve::inbound::Inbound;
use crate::serve::legacy;
use crate::serve::modern;
use crate::serve::replica::{self, Forward, Purpose};
use crate::serve::responses::{header, json, json_error};
use crate::trace_context::TraceContext;

/// Reads, checks and parses the body, then hands it to its era's endpoint. Returns the
/// JSON-RPC method (for the metrics' label) and the response.
pub async fn post(
    gateway: &Arc<Gateway>,
    principal: Option<String>,
    identity: Arc<Principal>,
    introduced: Option<&Introduction>,
    request: Request<Inbound>,
) -> (String, Response<Body>) {
    let (parts, body) = request.into_parts();
    let body = match read_body(gateway, &parts.headers, body).await {
        Ok(body) => body,
        Err(refused) => return ("POST".into(), *refused),
    };
    if introduced.is_some_and(|i| !i.vouches_for(&body)) {
        gateway.metrics.peer_refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "refused a forwarded request whose body is not the one its introduction was made for"
        );
        let refused = json_error(
            StatusCode::FORBIDDEN,
            "null",
            INVALID_REQUEST,
            "Forbidden: the mcp-stdio-peer header was made for another request",
        );
        return ("POST".into(), refused);
    }
    let parsed = match parse(&body) {
        Ok(parsed) => parsed,
        Err(refused) => return ("POST".into(), *refused),
    };
    let method = parsed.method.as_deref().unwrap_or("response").to_owned();
    let to = Post {
        gateway,
        principal,
        identity,
        parts: &parts,
        body: &body,
        parsed: &parsed,
    };
    // The request's log lines name the trace it belongs to (`_meta` over the header); with
    // OpenTelemetry on and none given, the one its span starts (recorded by `audited.rs`).
    let trace = TraceContext::in_message(&body)
        .or_else(|| TraceContext::from_headers(|name| header(&parts.headers, name)));
    let span = match &trace {
        Some(trace) => tracing::info_span!("request", trace_id = %trace.trace_id()),
        None if crate::telemetry::installed().is_some() => {
            tracing::info_span!("request", trace_id = tracing::field::Empty)
        }
        None => tracing::Span::none(),
    };
    let response = tracing::Instrument::instrument(to.endpoint(introduced.is_some()), span).await;
    (method, response)
}

/// The body as one JSON-RPC message, or the 400 that says why it is not.
fn parse(body: &Bytes) -> Result<Message<'_>, Box<Response<Body>>> {
    match message::parse(body) {
        Ok(parsed) => Ok(parsed),
        Err(message::Invalid::NotJson(_)) => Err(Box::new(json_error(
            StatusCode::BAD_REQUEST,
            "null",
            PARSE_ERROR,
            "Parse error: the body is not JSON",
        ))),
        Err(message::Invalid::NotMessage { reason, id }) => {
            let what = if message::is_batch(body) {
                "Invalid Request: batches are not supported (send each message on its own POST)"
                    .to_owned()
            } else {
                format!("Invalid Request: {reason}")
            };
            Err(Box::new(json_error(
                StatusCode::BAD_REQUEST,
                id.as_deref().unwrap_or("null"),
                INVALID_REQUEST,
                &what,
            )))
        }
    }
}

/// A parsed POST on its way to an endpoint.
struct Post<'a> {
    gateway: &'a Arc<Gateway>,
    principal: Option<String>,
    /// What a policy rule sees of the caller.
    identity: Arc<Principal>,
    parts: &'a Parts,
    body: &'a Bytes,
    parsed: &'a Message<'a>,
}

impl Post<'_> {
    fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    fn raw_id(&self) -> &str {
        self.parsed.id.map_or("null", |i| i.get())
    }

    /// The era's endpoint for this message (`introduced`: another replica sent it here).
    async fn endpoint(self, introduced: bool) -> Response<Body> {
        let config = &self.gateway.config;
        if config.modern_clients && envelope::claims_modern(self.parsed.params) {
            // A retry for a call parked on another replica goes there.
            if !introduced
                && let Some(owner) = replica::retry_owner(self.gateway, self.body, self.parsed)
            {
                return self.to_replica(owner).await;
            }
            let (gateway, headers, parsed) = (self.gateway, &self.parts.headers, self.parsed);
            let principal = self.principal.clone();
            let endpoint = modern::post(
                gateway,
                self.principal,
                self.identity,
                headers,
                self.body,
                parsed,
            );
            return audited::around(gateway, principal.as_deref(), headers, parsed, endpoint).await;
        }
        if config.modern_clients
            && header(self.headers(), "mcp-protocol-version")
                .is_some_and(crate::era::is_modern_version)
        {
            return json_error(
                StatusCode::BAD_REQUEST,
                self.raw_id(),
                crate::jsonrpc::error::INVALID_PARAMS,
                "Invalid params: a 2026-07-28 request needs params._meta with io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
            );
        }
        if config.modern_only {
            return modern_only_refusal(self.raw_id());
        }
        let (gateway, headers, parsed) = (self.gateway, &self.parts.headers, self.parsed);
        let principal = self.principal.clone();
        let endpoint = legacy::post(
            gateway,
            self.principal,
            self.identity,
            headers,
            self.body,
            parsed,
        );
        audited::around(gateway, principal.as_deref(), headers, parsed, endpoint).await
    }

    /// A retry whose call is parked on the replica `owner`, or a tasks request for a task it
    /// holds: sent there.
    async fn to_replica(&self, owner: String) -> Response<Body> {
        let path_and_query = self
            .parts
            .uri
            .path_and_query()
            .map_or(self.gateway.config.path.as_str(), |p| p.as_str());
        let forward = Forward {
            owner,
            method: Method::POST,
            path_and_query,
            headers: self.headers(),
            body: self.body.clone(),
            principal: self.principal.as_deref(),
            identity: self.principal.is_some().then_some(&*self.identity),
            raw_id: self.raw_id(),
            purpose: if self
                .parsed
                .method
                .as_deref()
                .is_some_and(|m| m.starts_with("tasks/"))
            {
                Purpose::Task
            } else {
                Purpose::Retry
            },
        };
        replica::to_owner(self.gateway, forward).await
    }
}

/// `--modern-only`: the handshake era is not served; the error names what is.
pub fn modern_only_refusal(id: &str) -> Response<Body> {
    json(
        StatusCode::BAD_REQUEST,
        Bytes::from(error_response(
            id,
            crate::era::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version: this server speaks 2026-07-28 only",
            Some(serde_json::json!({"supported": crate::era::MODERN_VERSIONS})),
        )),
    )
}
