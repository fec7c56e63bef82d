//! The front door: health and readiness, the `Host`/`Origin` guards and the bearer in
//! that order, metadata and metrics, and each POST classified body-first and handed to the
//! 2026-07-28 path (`modern`) or the handshake-era session endpoint (`legacy`). Among
//! replicas, a request whose session or parked call lives on another replica is sent
//! there; a request another replica sent here (with its introduction) skips the checks
//! that replica already made.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::serve::inbound::Inbound;
use axum::body::Body;
use http::header::{ALLOW, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderMap, Method, Request, Response, StatusCode};

use super::auth::Caller;
use super::cluster::{Bound, Introduction, Owner, PEER_HEADER, Refused};
use super::gateway::Gateway;
use super::legacy::SESSION_ID;
use super::metrics::Gauges;
use super::replica::{self, Forward, Purpose};
use super::responses::{Readiness, header, json_error, readyz, text};
use crate::jsonrpc::error::{INVALID_REQUEST, UPSTREAM_ERROR};

mod body;
mod caller;
mod post;

use body::{Refusal, read_body};
use caller::{
    PRM_PREFIX, authorization_server, authorize, issuer_for, protected_resource_metadata,
};

pub async fn handle(
    gateway: Arc<Gateway>,
    peer: SocketAddr,
    request: Request<Inbound>,
) -> Response<Body> {
    // The URI's parts are shared, so this keeps the path without copying it.
    let uri = request.uri().clone();
    let path = uri.path();
    let method = request.method().clone();
    let config = &gateway.config;
    match (&method, path) {
        (&Method::GET, "/healthz") => return text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => return ready(&gateway),
        _ => {}
    }
    let introduced = match introduction(&gateway, peer, &request) {
        Ok(introduced) => introduced,
        Err(refused) => return *refused,
    };
    if let Some(introduced) = introduced {
        // Another replica checked the Host, the Origin and the bearer; it sends only
        // requests for the MCP endpoint.
        gateway.metrics.from_peers.fetch_add(1, Ordering::Relaxed);
        if !path.eq_ignore_ascii_case(&config.path) {
            return text(StatusCode::NOT_FOUND, "not found\n");
        }
        // What a rule sees of a forwarded caller is what the forwarding replica saw.
        let caller = introduced.principal.as_deref().map(|name| {
            let mut caller = Caller::named(name);
            if let Some(identity) = &introduced.identity {
                caller.identity = Arc::new(identity.clone());
            }
            caller
        });
        return endpoint(&gateway, caller, Some(&introduced), request).await;
    }
    if let Err(refused) = guards(&gateway, peer, request.headers()) {
        return *refused;
    }
    // The MCP endpoint itself is never one of the authorization server's, so its requests
    // skip working out the issuer.
    if !path.eq_ignore_ascii_case(&config.path)
        && let Some(server) = gateway.auth.embedded().cloned()
    {
        let issuer = issuer_for(&gateway, peer, request.headers());
        if let Some(endpoint) = server.endpoint(&method, path, &issuer) {
            let started = Instant::now();
            let response =
                authorization_server(&gateway, &server, endpoint, issuer, peer, request).await;
            gateway.metrics.observe(
                method.as_str(),
                response.status().as_u16(),
                started.elapsed(),
            );
            return response;
        }
    }
    if method == Method::GET && path == "/metrics" {
        if let Err(refused) = authorize(&gateway, peer, request.headers()).await {
            return *refused;
        }
        let mut body = gateway.metrics.render(&Gauges {
            sessions: gateway.sessions.count(),
            spares: gateway.spares.count(),
            pending_requests: gateway.sessions.pending_requests(),
        });
        body.push_str(&super::audited::metrics(gateway.config.auditor.as_ref()));
        return Response::builder()
            .header(CONTENT_TYPE, "text/plain; version=0.0.4")
            .body(Body::from(body))
            .expect("a valid response");
    }
    if method == Method::GET && path.starts_with(PRM_PREFIX) && !gateway.auth.is_open() {
        return protected_resource_metadata(&gateway, peer, request.headers());
    }
    if !path.eq_ignore_ascii_case(&config.path) {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    let started = Instant::now();
    let caller = match authorize(&gateway, peer, request.headers()).await {
        Ok(caller) => caller,
        Err(refused) => {
            gateway
                .metrics
                .observe(method.as_str(), 401, started.elapsed());
            return *refused;
        }
    };
    endpoint(&gateway, caller, None, request).await
}

/// A whole config file's `/metrics`: its caller checked as `gateway`'s own endpoint would
/// check it (the guards, then the bearer).
pub async fn check_caller(
    gateway: &Gateway,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<(), Response<Body>> {
    guards(gateway, peer, headers).map_err(|refused| *refused)?;
    authorize(gateway, peer, headers)
        .await
        .map(|_| ())
        .map_err(|refused| *refused)
}

/// The MCP endpoint, for a caller already checked (here, or by the replica that sent it).
async fn endpoint(
    gateway: &Arc<Gateway>,
    caller: Option<Caller>,
    introduced: Option<&Introduction>,
    request: Request<Inbound>,
) -> Response<Body> {
    let started = Instant::now();
    let (principal, identity) = match caller {
        Some(caller) => (Some(caller.principal), caller.identity),
        None => (None, crate::serve::policing::anonymous()),
    };
    let method = request.method().clone();
    let config = &gateway.config;
    // What a POST says it is and accepts, before its body is read (a forwarded one was
    // checked by the replica that sent it).
    if method == Method::POST
        && introduced.is_none()
        && let Err(refused) = super::media::check_post(request.headers())
    {
        let (status, why) = match refused {
            super::media::Refused::ContentType(why) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Unsupported Media Type: {why}"),
            ),
            super::media::Refused::Accept(why) => {
                (StatusCode::NOT_ACCEPTABLE, format!("Not Acceptable: {why}"))
            }
        };
        let response = json_error(status, "null", UPSTREAM_ERROR, &why);
        gateway
            .metrics
            .observe("POST", response.status().as_u16(), started.elapsed());
        return response;
    }
    if introduced.is_none()
        && let Some(owner) = session_elsewhere(gateway, request.headers())
    {
        let response = to_session_owner(gateway, owner, principal, &identity, request).await;
        gateway.metrics.observe(
            method.as_str(),
            response.status().as_u16(),
            started.elapsed(),
        );
        return response;
    }
    let (label, response) = match method {
        Method::POST => post::post(gateway, principal, identity, introduced, request).await,
        Method::GET | Method::DELETE if config.modern_only => (
            method.to_string(),
            Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .header(ALLOW, "POST")
                .body(Body::empty())
                .expect("a valid response"),
        ),
        Method::GET => (
            "GET".to_owned(),
            super::legacy::stream(gateway, principal, request.headers()),
        ),
        Method::DELETE => (
            "DELETE".to_owned(),
            super::legacy::delete(gateway, principal, request.headers()),
        ),
        _ => (
            method.to_string(),
            Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .header(ALLOW, "GET, POST, DELETE")
                .body(Body::empty())
                .expect("a valid response"),
        ),
    };
    gateway
        .metrics
        .observe(&label, response.status().as_u16(), started.elapsed());
    response
}

/// The introduction of a request another replica forwarded, if it carries one. Among
/// replicas one that does not verify (or comes from outside `--cluster-peers`, or was
/// seen before) is refused outright: an outside client trying to pass as a replica, or
/// a header captured on the replica hop. A single `serve` ignores the header, as it
/// always did.
fn introduction(
    gateway: &Gateway,
    peer: SocketAddr,
    request: &Request<Inbound>,
) -> Result<Option<Introduction>, Refusal> {
    let headers = request.headers();
    let (Some(cluster), Some(value)) = (&gateway.cluster, headers.get(PEER_HEADER)) else {
        return Ok(None);
    };
    let forbidden = || {
        gateway.metrics.peer_refused.fetch_add(1, Ordering::Relaxed);
        Box::new(json_error(
            StatusCode::FORBIDDEN,
            "null",
            INVALID_REQUEST,
            "Forbidden: the mcp-stdio-peer header is for replicas of this cluster only; send the request without it",
        ))
    };
    if !cluster.accepts_peer(peer.ip()) {
        tracing::warn!(%peer, "refused a replica-to-replica request from outside --cluster-peers");
        return Err(forbidden());
    }
    let bound = Bound {
        to: &cluster.advertise,
        method: request.method(),
        path_and_query: request.uri().path_and_query().map_or("/", |p| p.as_str()),
        session: header(headers, SESSION_ID),
        last_event_id: header(headers, "last-event-id"),
    };
    match cluster.introduction(value, &bound) {
        Ok(introduced) => Ok(Some(introduced)),
        Err(Refused::Invalid(why)) => {
            tracing::warn!(%peer, why, "refused a request whose replica-to-replica header does not verify");
            Err(forbidden())
        }
        Err(Refused::Replayed) => {
            gateway
                .metrics
                .peer_replayed
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, outcome = "peer_replayed", "refused a replica-to-replica header seen before (a replay)");
            Err(forbidden())
        }
        Err(Refused::Busy(max)) => {
            tracing::warn!(%peer, max, "refused a forwarded request from a new replica: --peer-max-senders replicas are remembered");
            let mut busy = json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "null",
                INVALID_REQUEST,
                &format!(
                    "Service Unavailable: {max} replicas forwarded requests in the last seconds (--peer-max-senders); try again shortly"
                ),
            );
            busy.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            Err(Box::new(busy))
        }
    }
}

/// The replica that owns the session a request names, when that is another one. An id
/// that does not open is left to the session table, which answers 404 as for any
/// unknown id.
fn session_elsewhere(gateway: &Gateway, headers: &HeaderMap) -> Option<String> {
    let cluster = gateway.cluster.as_ref()?;
    match cluster.session_owner(header(headers, SESSION_ID)?)? {
        Owner::Me => None,
        Owner::Peer(owner) => Some(owner),
    }
}

/// Sends a session's request (POST, GET stream, DELETE) to the replica that owns it.
async fn to_session_owner(
    gateway: &Gateway,
    owner: String,
    principal: Option<String>,
    identity: &crate::policy::Principal,
    request: Request<Inbound>,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let body = match read_body(gateway, &parts.headers, body).await {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(gateway.config.path.as_str(), |p| p.as_str());
    replica::to_owner(
        gateway,
        Forward {
            owner,
            method: parts.method.clone(),
            path_and_query,
            headers: &parts.headers,
            body,
            identity: principal.is_some().then_some(identity),
            principal: principal.as_deref(),
            raw_id: "null",
            purpose: Purpose::Session,
        },
    )
    .await
}

/// `Host` and `Origin`, before anything else is looked at.
fn guards(gateway: &Gateway, peer: SocketAddr, headers: &HeaderMap) -> Result<(), Refusal> {
    let guards = &gateway.config.guards;
    let forwarded_host = guards
        .trusts(peer.ip())
        .then(|| header(headers, "x-forwarded-host"))
        .flatten();
    let host = forwarded_host.or_else(|| header(headers, HOST.as_str()));
    if let Err(refusal) = guards.check_host(host) {
        tracing::info!(?refusal, "refused a request");
        return Err(Box::new(json_error(
            StatusCode::FORBIDDEN,
            "null",
            INVALID_REQUEST,
            "Forbidden: this Host is not allowed (DNS rebinding protection)",
        )));
    }
    let origins: Vec<&str> = headers
        .get_all(ORIGIN)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if let Err(refusal) = guards.check_origin(&origins) {
        tracing::info!(?refusal, "refused a request");
        return Err(Box::new(json_error(
            StatusCode::FORBIDDEN,
            "null",
            INVALID_REQUEST,
            "Forbidden: this Origin is not allowed (add it with --allow-origin)",
        )));
    }
    Ok(())
}

fn ready(gateway: &Gateway) -> Response<Body> {
    readyz(if gateway.draining.is_cancelled() {
        Readiness::Draining
    } else if gateway.closing.is_cancelled() {
        Readiness::ShuttingDown
    } else if gateway.sessions.count() >= gateway.config.max_sessions {
        Readiness::Full
    } else {
        Readiness::Ready
    })
}
