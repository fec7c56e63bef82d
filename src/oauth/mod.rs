//! The OAuth 2.1 client of the relay (MCP authorization, `docs/oauth.md`).
//!
//! Built so far: reading `WWW-Authenticate` challenges, the metadata locations and the URL
//! rules, metadata checks (issuer, PKCE S256, https endpoints), discovery over HTTP that
//! never follows a redirect, the token file (private, atomic, symlink-proof), PKCE and
//! `state`, the authorization URL and the callback checks (state, RFC 9207 `iss`), and
//! token answers (dead vs passing failures, refresh-token retention). Not yet: client
//! registration, the loopback callback server, the browser and device flows, using and
//! refreshing tokens in the relay, the keyring backend, the cross-process lock, and the
//! `login` / `logout` / `status` / `token` commands.

pub mod authorize;
pub mod challenge;
pub mod discovery;
pub mod http;
pub mod metadata;
pub mod pkce;
pub mod secret;
pub mod store;
pub mod token;
pub mod wellknown;
