//! Who is calling, as the front door asks: the bearer checked by the configured mode (one
//! log line and one counter per decision) and the 401/403/503 a refusal gets, with its
//! `WWW-Authenticate`; the protected resource metadata; this endpoint's base URL as the
//! client sees it (a trusted proxy may say; the host sanitized); and the hand-over to the
//! embedded authorization server.

use std::net::SocketAddr;

use crate::serve::inbound::Inbound;
use axum::body::Body;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;

use super::body::Refusal;
use crate::jsonrpc::error::INVALID_REQUEST;
use crate::serve::auth::{Caller, Refused};
use crate::serve::gateway::Gateway;
use crate::serve::responses::{header, json_error};

pub const PRM_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// Checks the caller (`--auth-token` or `--oauth-issuer`; open otherwise). The principal
/// names whose sessions and pooled child a request may use. Each decision is one log line
/// and one `mcp_stdio_auth_total` count; a refusal says what to send.
pub async fn authorize(
    gateway: &Gateway,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<Option<Caller>, Refusal> {
    if gateway.auth.is_open() {
        return Ok(None);
    }
    // This endpoint as the client reached it: what an embedded grant must be for (worked
    // out only when asked, so the other modes do not pay for it).
    let resource = || match &gateway.config.public_url {
        Some(url) => url.as_str().to_owned(),
        None => format!(
            "{}{}",
            public_base(gateway, peer, headers),
            gateway.config.path
        ),
    };
    let refused = match gateway
        .auth
        .authorize(header(headers, AUTHORIZATION.as_str()), resource)
        .await
    {
        Ok(caller) => {
            gateway.metrics.authenticated("accepted");
            if let Some(c) = &caller {
                tracing::debug!(principal = %c.principal, client_id = c.client_id.as_deref().unwrap_or("-"), outcome = "accepted", "authentication");
            }
            return Ok(caller);
        }
        Err(refused) => refused,
    };
    gateway.metrics.authenticated(refused.outcome());
    tracing::info!(%peer, outcome = refused.outcome(), "authentication refused");
    let metadata = format!(
        "{}{PRM_PREFIX}{}",
        public_base(gateway, peer, headers),
        gateway.config.path
    );
    let scope = gateway.auth.scopes().join(" ");
    let (status, challenge, message) = match &refused {
        Refused::Missing => (
            StatusCode::UNAUTHORIZED,
            if scope.is_empty() {
                format!(r#"Bearer resource_metadata="{metadata}""#)
            } else {
                format!(r#"Bearer resource_metadata="{metadata}", scope="{scope}""#)
            },
            "Unauthorized: send Authorization: Bearer <token>".to_owned(),
        ),
        Refused::Invalid(outcome) => (
            StatusCode::UNAUTHORIZED,
            format!(
                r#"Bearer error="invalid_token", error_description="{}", resource_metadata="{metadata}""#,
                outcome.label()
            ),
            format!(
                "Unauthorized: the bearer token is not accepted ({}); get a new one",
                outcome.label().replace('_', " ")
            ),
        ),
        Refused::Unavailable => {
            let mut response = json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "null",
                INVALID_REQUEST,
                "Service unavailable: the authorization store cannot be reached; try again shortly",
            );
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
            return Err(Box::new(response));
        }
        Refused::InsufficientScope(needed) => {
            let needed = needed.join(" ");
            (
                StatusCode::FORBIDDEN,
                format!(
                    r#"Bearer error="insufficient_scope", scope="{needed}", resource_metadata="{metadata}""#
                ),
                format!(
                    "Forbidden: the token lacks the scope this server requires; ask for: {needed}"
                ),
            )
        }
    };
    let mut response = json_error(status, "null", INVALID_REQUEST, &message);
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    Err(Box::new(response))
}

/// `scheme://host` as the client sees this server (a trusted proxy may say). The host is
/// the first of a list, cut down to the characters a host and port can hold, since it
/// is written into metadata, challenges and the embedded issuer.
pub fn public_base(gateway: &Gateway, peer: SocketAddr, headers: &HeaderMap) -> String {
    let trusted = gateway.config.guards.trusts(peer.ip());
    let scheme = trusted
        .then(|| header(headers, "x-forwarded-proto"))
        .flatten()
        .filter(|p| *p == "https" || *p == "http")
        .unwrap_or("http");
    let host = trusted
        .then(|| header(headers, "x-forwarded-host"))
        .flatten()
        .or_else(|| header(headers, HOST.as_str()))
        .map(sanitize_host)
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| match gateway.config.listen.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]:{}", gateway.config.guards.port),
            ip => format!("{ip}:{}", gateway.config.guards.port),
        });
    format!("{scheme}://{host}")
}

fn sanitize_host(raw: &str) -> String {
    raw.split(',')
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        .collect()
}

/// The embedded authorization server's identity for this request.
pub fn issuer_for(
    gateway: &Gateway,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> crate::authserver::Issuer {
    match &gateway.config.public_url {
        Some(url) => crate::authserver::Issuer::from_public_url(url, &gateway.config.path),
        None => crate::authserver::Issuer::from_request(
            &public_base(gateway, peer, headers),
            &gateway.config.path,
        ),
    }
}

/// A request to the embedded authorization server: its body read up to
/// `--oauth-max-form-size`, then handed over.
pub async fn authorization_server(
    gateway: &Gateway,
    server: &crate::authserver::AuthServer,
    endpoint: crate::authserver::Endpoint,
    issuer: crate::authserver::Issuer,
    peer: SocketAddr,
    request: Request<Inbound>,
) -> Response<Body> {
    let max = server.config.max_form_size;
    let (parts, body) = request.into_parts();
    let declared =
        header(&parts.headers, CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
    let body = if declared.is_some_and(|n| n > max as u64) {
        Err(())
    } else {
        http_body_util::Limited::new(body, max)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|_| ())
    };
    let Ok(body) = body else {
        return crate::authserver::too_large(max);
    };
    let request = crate::authserver::Request {
        headers: &parts.headers,
        query: parts.uri.query().unwrap_or(""),
        body,
        trusted_peer: gateway.config.guards.trusts(peer.ip()),
        issuer,
    };
    server.serve(endpoint, request).await
}

pub fn protected_resource_metadata(
    gateway: &Gateway,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Response<Body> {
    let resource = match &gateway.config.public_url {
        Some(url) => url.as_str().to_owned(),
        None => format!(
            "{}{}",
            public_base(gateway, peer, headers),
            gateway.config.path
        ),
    };
    let mut document = serde_json::json!({
        "resource": resource,
        "bearer_methods_supported": ["header"],
        "resource_name": "mcp-stdio serve",
    });
    if let Some(issuer) = gateway
        .auth
        .issuer(|| issuer_for(gateway, peer, headers).identifier())
    {
        document["authorization_servers"] = serde_json::json!([issuer]);
    }
    if !gateway.auth.scopes().is_empty() {
        document["scopes_supported"] = serde_json::json!(gateway.auth.scopes());
    }
    Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(document.to_string()))
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use super::sanitize_host;

    #[test]
    fn a_host_is_cut_to_what_a_host_and_port_can_hold() {
        assert_eq!(
            sanitize_host("mcp.example.com:8443"),
            "mcp.example.com:8443"
        );
        assert_eq!(sanitize_host("[::1]:8080"), "[::1]:8080");
        assert_eq!(sanitize_host("a.example, b.example"), "a.example");
        assert_eq!(
            sanitize_host("evil.example\"/><script>x</script>"),
            "evil.examplescriptxscript"
        );
        assert_eq!(sanitize_host("h\r\nx-injected: 1"), "hx-injected:1");
        assert_eq!(sanitize_host("\"\"/"), "");
    }
}
