//! The OAuth 2.1 client of the relay (MCP authorization, `docs/oauth.md`).
//!
//! Built so far: reading `WWW-Authenticate` challenges, the metadata locations and the URL
//! rules, metadata checks (issuer, PKCE S256, https endpoints), discovery over HTTP that
//! never follows a redirect, and the token file (private, atomic, symlink-proof). Not yet:
//! client registration, the browser and device flows, refresh, the keyring backend, the
//! cross-process lock, and the `login` / `logout` / `status` commands.

pub mod challenge;
pub mod discovery;
pub mod http;
pub mod metadata;
pub mod secret;
pub mod store;
pub mod wellknown;
