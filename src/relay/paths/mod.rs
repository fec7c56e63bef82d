//! The paths tier: one module per pairing of the host's era with the upstream's, each
//! owning its own state and given only the request context (`Ctx`).
//!
//! - `legacy`: a handshake-era host and server, byte for byte (either transport).
//! - `passthrough`: a 2026-07-28 host and server, the host's bytes plus mirrored headers.
//! - `to_modern`: a legacy host in front of a 2026-07-28 server (with `listen`, the
//!   host's `host_profile`, its 2025-11-25 tasks in `host_tasks`, and the relay's
//!   `own_request`s).
//! - `to_legacy`: a 2026-07-28 host in front of a legacy server (its state in
//!   `modern_host`, its `parked` calls, `subscriptions/listen` served in `local_listen`,
//!   what the server sends besides answers in `server_messages`).
//! - `tool_args`: a modern server's `Mcp-Param-*` headers, for both paths that reach one.

mod host_profile;
mod host_tasks;
pub mod legacy;
mod listen;
mod local_listen;
pub mod modern_host;
mod own_request;
mod parked;
pub mod passthrough;
mod server_messages;
pub mod to_legacy;
pub mod to_modern;
mod tool_args;
