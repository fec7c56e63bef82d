//! Authorization server metadata (RFC 8414): the endpoints, and exactly what this server
//! accepts — `code` with PKCE S256, public clients, refresh rotation, revocation.

use http::StatusCode;
use serde_json::json;

use super::issuer::Issuer;
use super::reply::{self, Reply};
use super::server::AuthServer;

pub fn document(server: &AuthServer, issuer: &Issuer) -> Reply {
    let mut document = json!({
        "issuer": issuer.identifier(),
        "authorization_endpoint": issuer.endpoint("authorize"),
        "token_endpoint": issuer.endpoint("token"),
        "registration_endpoint": issuer.endpoint("register"),
        "revocation_endpoint": issuer.endpoint("revoke"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
    });
    if !server.config.scopes.is_empty() {
        document["scopes_supported"] = json!(server.config.scopes);
    }
    if !server.documents.is_empty() {
        document["client_id_metadata_document_supported"] = json!(true);
    }
    if issuer.is_https() {
        document["authorization_response_iss_parameter_supported"] = json!(true);
    }
    let mut response = reply::json(StatusCode::OK, &document);
    // Metadata may be cached briefly; it changes only with the configuration.
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("public, max-age=300"),
    );
    response
}
