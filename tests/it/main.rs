//! The hermetic integration tests, one crate (compiled once, as ripgrep does): the real
//! binary against in-process fakes on 127.0.0.1:0, a module per area. The fakes and
//! drivers live in `tests/common/`.

#[path = "../common/mod.rs"]
mod common;

mod check;
mod cli;
mod faults_relay;
mod faults_serve;
mod hot_functions;
mod keyring;
mod layers;
mod oauth;
mod oauth_dpop;
mod oauth_enterprise;
mod policy_check;
mod relay_answers;
mod relay_audit;
mod relay_cancel;
mod relay_eras;
mod relay_http;
mod relay_session;
mod relay_sse;
mod relay_stdio;
mod relay_stdio_modes;
mod relay_streams;
mod relay_tasks;
mod sandbox;
mod sandbox_guards;
mod secrets;
mod serve;
mod serve_aggregate;
mod serve_aggregate_remote;
mod serve_audit;
mod serve_auth;
mod serve_cluster;
mod serve_config;
mod serve_config_identity;
mod serve_connections;
mod serve_modern;
mod serve_oauth;
mod serve_oauth_attacks;
mod serve_policy;
mod serve_policy_identity;
mod serve_spares;
mod serve_strict;
mod serve_tasks;
mod serve_tasks_translated;
mod telemetry;
mod trace_context;
