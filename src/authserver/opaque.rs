//! The opaque values this server hands out: random tokens with a recognizable prefix, kept
//! in the store only as their SHA-256.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::remembered::digest;

/// Access tokens start with this (secret scanners and logs can recognize them).
pub const ACCESS_PREFIX: &str = "mcpat_";
pub const REFRESH_PREFIX: &str = "mcprt_";

/// A fresh 256-bit random value, base64url (43 characters).
pub fn random_token() -> String {
    crate::oauth::pkce::random_token(32).expose().to_owned()
}

/// What the store keeps of a token or code: its SHA-256, base64url.
pub fn hash_token(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest(token))
}
