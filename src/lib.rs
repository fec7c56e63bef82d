//! mcp-stdio: a gateway between Model Context Protocol peers that cannot talk directly.
//!
//! The binary is a thin shell over this library: [`cli::main`] parses the command line and
//! dispatches to a mode. In relay mode stdout is the protocol wire, so nothing in this crate
//! may print to it except the single writer in [`jsonrpc::writer`].
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod audit;
pub mod authserver;
pub mod check;
pub mod cli;
pub mod cluster_key;
pub mod env_expand;
pub mod era;
pub mod http;
pub mod jsonrpc;
pub mod jwks;
pub mod logging;
pub mod oauth;
pub mod parking;
pub mod policy;
pub mod postgres_dsn;
pub mod redact;
pub mod relay;
mod remembered;
pub mod sandbox;
pub mod secret;
pub mod serve;
pub mod shutdown;
pub mod telemetry;
pub mod trace_context;
