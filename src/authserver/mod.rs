//! The embedded OAuth 2.1 authorization server (`--enable-oauth`): metadata (RFC 8414),
//! dynamic client registration (RFC 7591), the authorization endpoint with a consent
//! page, the token endpoint (code + PKCE S256, refresh rotation with replay detection)
//! and revocation (RFC 7009). Tokens are opaque 256-bit random strings; the store keeps
//! only their SHA-256. The front door routes requests here and asks `check_access` about
//! each MCP request's bearer.

mod authorization;
mod authorize;
mod cimd;
mod client;
mod config;
mod consent;
mod form;
mod issuer;
pub mod login;
mod metadata;
mod opaque;
mod redirect;
mod register;
mod reply;
mod revoke;
mod routes;
mod server;
pub mod store;
mod token;
pub mod users;

pub use config::AuthServerConfig;
pub use issuer::Issuer;
pub use opaque::random_token;
pub use reply::Reply;
pub use routes::{Endpoint, Request, too_large};
pub use server::{AccessRefused, AuthServer};
pub use store::Grant;
