//! The aggregate endpoint's sessions: one client session (or a principal's pooled session)
//! in front of several served servers. `AggregateBackend` is a `Backend` like a stdio
//! child's, so the handshake-era endpoint, the 2026-07-28 endpoint and the front door drive
//! it unchanged; behind it each member server gets a session of its own, opened on first
//! use through `Members`. The rules (names, URIs, cursors, routes) are `aggregate/`'s; this
//! module does the I/O.
//!
//! From the ground up: `settings.rs` what an endpoint is told; `scout.rs` the gateway's own
//! requests (a server's handshake and lists); `profile.rs` a catalog per kind of client;
//! `endpoint.rs` what every session of one endpoint shares (each server's state, the
//! profiles, their scouts) and `reading.rs` how its lists are read; `members.rs` a client session's own sessions with the servers;
//! `backend.rs` the `Backend` itself; `relay.rs` a routed request carried there and back.
//! This file is only the list.

mod backend;
mod endpoint;
mod members;
mod profile;
mod reading;
mod relay;
mod scout;
mod settings;

pub use backend::AggregateBackend;
pub use endpoint::{Endpoint, ServerState};
pub use settings::{AggregateFlags, AggregateSpec, Members};
