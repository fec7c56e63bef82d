//! A config file's entry made a `ServeConfig`: the command line's settings with the
//! entry's own on top (path, command, era, bounds, spares, its way of checking callers).

use std::time::Duration;

use super::auth::ResourceServerConfig;
use super::config::ServeConfig;
use super::config_file::{Entry, EntryAuth};

/// This entry's `ServeConfig`: the command line's settings with the entry's on top.
pub fn apply(entry: &Entry, base: &ServeConfig) -> ServeConfig {
    let mut config = base.clone();
    config.path = format!("/{}/mcp", entry.name);
    config.command = entry.command.clone();
    if let Some(era) = entry.child_era {
        config.child_era = era;
    }
    if let Some(n) = entry.max_sessions {
        config.max_sessions = n;
    }
    if let Some(n) = entry.max_sessions_per_principal {
        config.max_sessions_per_principal = n;
    }
    // A server's spares follow its use unless its entry asks for them from the start.
    config.spares.from_start = entry.spare_children.is_some();
    if let Some(n) = entry.spare_children {
        config.spares.most = n;
    }
    if let Some(ttl) = entry.spare_idle_ttl {
        config.spares.idle_ttl = ttl;
    }
    if let Some(ttl) = entry.session_idle_ttl {
        config.session_idle_ttl = ttl;
    }
    if let Some(n) = entry.max_requests_per_session {
        config.max_requests_per_session = n;
    }
    if let Some(public) = &base.public_url {
        // The command line's --public-url names the listener; each server is under it.
        config.public_url = public.join(&format!("{}/mcp", entry.name)).ok();
    }
    // A server that checks its callers its own way does not use the listener's
    // authorization server (`--enable-oauth`).
    if entry.auth.is_some() {
        config.auth_server = None;
    }
    match &entry.auth {
        None => {}
        Some(EntryAuth::Open) => {
            config.auth_token = None;
            config.resource_server = None;
        }
        Some(EntryAuth::Token { token, .. }) => {
            config.auth_token = Some(token.clone());
            config.resource_server = None;
        }
        Some(EntryAuth::Issuer {
            issuer,
            audience,
            scopes,
        }) => {
            let inherited = base.resource_server.as_ref();
            config.auth_token = None;
            config.resource_server = Some(ResourceServerConfig {
                issuer: issuer.clone(),
                audience: audience.clone(),
                scopes: scopes.clone(),
                leeway: inherited.map_or(Duration::from_secs(30), |r| r.leeway),
                refetch_interval: inherited.map_or(Duration::from_secs(30), |r| r.refetch_interval),
                token_cache: inherited.map_or(4096, |r| r.token_cache),
                introspection: None,
                kind_check: inherited.map(|r| r.kind_check).unwrap_or_default(),
                http: crate::http::client::ClientOptions {
                    connect_timeout: Duration::from_secs(10),
                    read_timeout: Some(Duration::from_secs(30)),
                    extra_roots: Vec::new(),
                },
            });
        }
    }
    config
}
