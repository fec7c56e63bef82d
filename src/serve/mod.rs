//! Serve mode: local stdio MCP servers published over HTTP for both protocol eras. This file
//! is the module list, tier by tier from the ground up, and the entry points; a lower tier
//! never imports a higher one (`tests/it/layers.rs` holds it to that).

// Backends (the seam, and the stdio child behind it) and the sessions that drive them.
mod backend;
pub mod child;
mod child_call;
pub mod child_era;
mod orphans;
mod server_events;
mod session;
mod sessions;
pub mod spares;
mod stdio_backend;
mod tool_annotations;

// What the request path checks and counts, knowing nothing of the gateway, and the
// aggregate endpoint's rules for names and pages.
pub mod aggregate;
pub mod auth;
pub mod cluster;
pub mod guard;
mod inbound;
pub mod ladder;
mod media;
mod metrics;
mod policing;
mod pool;
mod responses;
mod task_table;
mod tool_cache;

// An aggregate endpoint's sessions, in front of several served servers.
pub mod aggregator;

// One served server: its configuration, shared state and life.
mod config;
mod gateway;
mod running;

// The endpoints: the handshake era, replicas, and 2026-07-28 (params, listen, the pool's
// backends, then the endpoint itself), and the audit line of each request.
mod audited;
mod legacy;
mod listen;
mod modern;
mod params;
mod pooled;
mod replica;
mod tasks;
mod trace_meta;

// The front door, a config file's servers (and its aggregate endpoints) behind one
// listener, and the listener.
mod aggregates;
pub mod config_aggregates;
mod config_apply;
pub mod config_file;
mod config_remote;
mod front;
mod listener;
mod servers;
mod servers_routes;

pub use config::ServeConfig;
pub use listener::{run, run_servers};
pub use policing::PolicySource;
