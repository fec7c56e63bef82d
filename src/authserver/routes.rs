//! The endpoints as requests name them: which one a method and path reach, and the call
//! into it with what the front door knows of the request.

use bytes::Bytes;
use http::{HeaderMap, Method};

use super::authorize;
use super::issuer::Issuer;
use super::metadata;
use super::register;
use super::reply::{self, Reply};
use super::revoke;
use super::server::AuthServer;
use super::token;

/// One of the server's endpoints, as a request names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Metadata,
    Register,
    AuthorizePage,
    AuthorizeDecision,
    Token,
    Revoke,
    /// Back from the OpenID provider (`--login-oidc`).
    LoginCallback,
}

/// What the front door knows about a request to an endpoint.
pub struct Request<'a> {
    pub headers: &'a HeaderMap,
    pub query: &'a str,
    pub body: Bytes,
    /// Whether the peer is a `--trusted-proxy` (its user header is believed).
    pub trusted_peer: bool,
    pub issuer: Issuer,
}

/// A body over `--oauth-max-form-size`.
pub fn too_large(max: usize) -> Reply {
    reply::error(
        http::StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request",
        &format!("the request body is over {max} bytes (--oauth-max-form-size)"),
    )
}

impl AuthServer {
    /// The endpoint `method` and `path` name, if any.
    pub fn endpoint(&self, method: &Method, path: &str, issuer: &Issuer) -> Option<Endpoint> {
        const METADATA: [&str; 2] = [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ];
        if *method == Method::GET
            && METADATA
                .iter()
                .any(|m| path.starts_with(m) || path.ends_with(m))
        {
            return Some(Endpoint::Metadata);
        }
        match (method, issuer.local_endpoint(path)?) {
            (&Method::POST, "register") => Some(Endpoint::Register),
            (&Method::GET, "authorize") => Some(Endpoint::AuthorizePage),
            (&Method::POST, "authorize") => Some(Endpoint::AuthorizeDecision),
            (&Method::POST, "token") => Some(Endpoint::Token),
            (&Method::POST, "revoke") => Some(Endpoint::Revoke),
            (&Method::GET, "login-callback") if self.login.is_some() => {
                Some(Endpoint::LoginCallback)
            }
            _ => None,
        }
    }

    pub async fn serve(&self, endpoint: Endpoint, request: Request<'_>) -> Reply {
        let cx = authorize::Context {
            headers: request.headers,
            trusted_peer: request.trusted_peer,
            issuer: &request.issuer,
        };
        match endpoint {
            Endpoint::Metadata => metadata::document(self, &request.issuer),
            Endpoint::Register => register::register(self, &request.body).await,
            Endpoint::AuthorizePage => authorize::show(self, request.query.as_bytes(), &cx).await,
            Endpoint::AuthorizeDecision => authorize::decide(self, &request.body, &cx).await,
            Endpoint::Token => token::token(self, request.headers, &request.body).await,
            Endpoint::Revoke => revoke::revoke(self, &request.body).await,
            Endpoint::LoginCallback => {
                authorize::after_login(self, request.query.as_bytes(), &cx).await
            }
        }
    }
}
