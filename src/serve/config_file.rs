//! `serve --config FILE`: several stdio servers from one file, in TOML (`[servers.NAME]`)
//! or in the `mcpServers` JSON that Claude Desktop, Claude Code and Cursor write (VS Code's
//! `servers` too). Each entry becomes its own `ServeConfig` at `/NAME/mcp`, on top of the
//! command line's settings. Parsing is pure: reading the file and checking the programs
//! exist are the only I/O, so a reload can judge a file before anything changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::child::ChildCommand;
use super::child_era::ChildEraChoice;
use crate::env_expand::expand;
use crate::secret::Secret;

/// One server of the file, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub command: ChildCommand,
    pub child_era: Option<ChildEraChoice>,
    pub max_sessions: Option<usize>,
    pub max_sessions_per_principal: Option<usize>,
    pub spare_children: Option<usize>,
    pub session_idle_ttl: Option<Option<Duration>>,
    /// `spare_idle_ttl`: seconds without a new session before a used server's spares end
    /// (`Some(None)`: never).
    pub spare_idle_ttl: Option<Option<Duration>>,
    pub max_requests_per_session: Option<usize>,
    /// `None`: the command line's way of checking callers.
    pub auth: Option<EntryAuth>,
    /// `[servers.NAME.aliases]`: a tool's or prompt's own name → the name an aggregate
    /// endpoint publishes instead (to settle a collision or a name too long).
    pub aliases: BTreeMap<String, String>,
}

impl Entry {
    /// Whether it checks callers its own way (a token or an issuer of its own).
    pub fn checks_callers_itself(&self) -> bool {
        matches!(
            self.auth,
            Some(EntryAuth::Token { .. } | EntryAuth::Issuer { .. })
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EntryAuth {
    Open,
    /// A shared secret, read from the environment variable named in the file (a secret
    /// does not belong in a file that is checked in).
    Token {
        variable: String,
        token: Secret,
    },
    /// Tokens from an identity provider (resource-server mode).
    Issuer {
        issuer: url::Url,
        audience: String,
        scopes: Vec<String>,
    },
}

/// The keys a server entry may have, as written.
#[derive(Debug, Deserialize)]
struct Raw {
    /// `stdio` (or absent) is served; `http`, `sse` and others are remote servers.
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    child_era: Option<String>,
    max_sessions: Option<u64>,
    max_sessions_per_principal: Option<u64>,
    spare_children: Option<u64>,
    session_idle_ttl: Option<f64>,
    spare_idle_ttl: Option<f64>,
    max_requests_per_session: Option<u64>,
    auth: Option<RawAuth>,
    #[serde(default)]
    aliases: BTreeMap<String, String>,
    /// A remote server's (`type` `http` or `sse`): `url`, `headers`, `oauth`, `ca_cert`.
    #[serde(flatten)]
    remote: super::config_remote::RemoteKeys,
    /// Whatever else a host wrote (`disabled`, `alwaysAllow`, …).
    #[serde(flatten)]
    other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    /// `open`, `token` or `oauth-issuer`.
    mode: String,
    token_env: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

const KNOWN: &str = "type, command, args, env, cwd, child_era, max_sessions, max_sessions_per_principal, spare_children, spare_idle_ttl, session_idle_ttl, max_requests_per_session, auth, aliases, url, headers, oauth, ca_cert";

/// Reads and checks the file; `env` reads the environment (for `${VAR}` and token
/// variables). The error names the file and says what would work.
pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--config {}: cannot read it: {e}", path.display()))?;
    parse(&text, path, env).map_err(|e| format!("--config {}: {e}", path.display()))
}

/// Parses a file's text; `path` decides the format (`.toml`, `.json`, else by content)
/// and is where relative `cwd`s start.
pub fn parse(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, String> {
    let json = match path.extension().and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    };
    let document: serde_json::Value = if json {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?
    } else {
        let value: toml::Value =
            toml::from_str(text).map_err(|e| format!("not valid TOML: {e}"))?;
        serde_json::to_value(value).map_err(|e| format!("not usable: {e}"))?
    };
    let servers = ["mcpServers", "servers"]
        .iter()
        .find_map(|key| document.get(*key))
        .and_then(serde_json::Value::as_object)
        .ok_or("no servers: write them under `mcpServers` (JSON, as Claude Desktop and Claude Code do) or `[servers.NAME]` (TOML)")?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut entries = Vec::new();
    for (name, value) in servers {
        check_name(name)?;
        let raw: Raw = serde_json::from_value(value.clone())
            .map_err(|e| format!("server {name:?}: {e}; its keys are {KNOWN}"))?;
        if let Some(kind) = raw.kind.as_deref()
            && !super::config_remote::TYPES.contains(&kind)
        {
            let why = format!(
                "server {name:?}: type {kind:?} is not served: use \"stdio\" (a command), \"http\" (Streamable HTTP) or \"sse\" (HTTP+SSE)"
            );
            if !json {
                return Err(why);
            }
            // A host's file may hold kinds this gateway does not know: the rest still serve.
            tracing::warn!("{why}; skipped");
            continue;
        }
        if !raw.other.is_empty() {
            let keys: Vec<&str> = raw.other.keys().map(String::as_str).collect();
            if !json {
                return Err(format!(
                    "server {name:?}: unknown key(s) {}; its keys are {KNOWN}",
                    keys.join(", ")
                ));
            }
            tracing::debug!(server = %name, keys = %keys.join(", "), "keys this gateway does not use; ignored");
        }
        entries.push(entry(name, raw, base, env).map_err(|e| format!("server {name:?}: {e}"))?);
    }
    if entries.is_empty() {
        return Err("no servers in it: each needs a `command` (stdio) or a `url` (\"type\": \"http\" or \"sse\")".into());
    }
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let aggregates = super::config_aggregates::parse(&document, &names)?;
    let policy = match document.get("policy") {
        Some(table) => crate::policy::parse_value(table.clone())?,
        None => Vec::new(),
    };
    Ok(Loaded {
        entries,
        aggregates,
        policy,
    })
}

/// A file's servers, the aggregate endpoints it names, and its `[policy]` rules.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub entries: Vec<Entry>,
    pub aggregates: Vec<super::config_aggregates::FileAggregate>,
    pub policy: Vec<crate::policy::RuleSpec>,
}

fn check_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fits {
        Ok(())
    } else {
        Err(format!(
            "server name {name:?} cannot be a path segment: use 1 to 64 letters, digits, '-' or '_' (it is served at /NAME/mcp)"
        ))
    }
}

fn entry(
    name: &str,
    raw: Raw,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Entry, String> {
    let remote = raw.kind.as_deref().filter(|kind| *kind != "stdio");
    let command = match remote {
        Some(kind) => remote_command(name, kind, &raw, base, env)?,
        None => stdio_command(name, &raw, base, env)?,
    };
    let child_era = match raw.child_era.as_deref() {
        // The relay in front of a remote server speaks the handshake era on its stdio.
        None if remote.is_some() => Some(ChildEraChoice::Legacy),
        None => None,
        Some("auto") => Some(ChildEraChoice::Auto),
        Some("legacy") => Some(ChildEraChoice::Legacy),
        Some("modern") => Some(ChildEraChoice::Modern),
        Some(other) => return Err(format!("child_era {other:?}: use auto, legacy or modern")),
    };
    let bounded =
        |value: Option<u64>, key: &str, min: u64, max: u64| -> Result<Option<usize>, String> {
            match value {
                Some(n) if n < min || n > max => Err(format!("{key} {n}: use {min} to {max}")),
                other => Ok(other.map(|n| n as usize)),
            }
        };
    let seconds = |value: Option<f64>, key: &str| match value {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => {
            Ok(Some((s > 0.0).then(|| Duration::from_secs_f64(s))))
        }
        Some(s) => Err(format!("{key} {s}: use seconds from 0 (never) to 86400")),
    };
    let session_idle_ttl = seconds(raw.session_idle_ttl, "session_idle_ttl")?;
    let spare_idle_ttl = seconds(raw.spare_idle_ttl, "spare_idle_ttl")?;
    if raw.spare_children.is_some() && spare_idle_ttl.is_some() {
        return Err("spare_children keeps spares from the start and never ends them, so spare_idle_ttl would do nothing: leave out spare_idle_ttl, or leave out spare_children to have spares once the server is used".into());
    }
    Ok(Entry {
        name: name.to_owned(),
        command,
        child_era,
        max_sessions: bounded(raw.max_sessions, "max_sessions", 1, 100_000)?,
        max_sessions_per_principal: bounded(
            raw.max_sessions_per_principal,
            "max_sessions_per_principal",
            1,
            100_000,
        )?,
        spare_children: bounded(raw.spare_children, "spare_children", 0, 1000)?,
        session_idle_ttl,
        spare_idle_ttl,
        max_requests_per_session: bounded(
            raw.max_requests_per_session,
            "max_requests_per_session",
            1,
            65_536,
        )?,
        auth: raw.auth.map(|a| auth(a, env)).transpose()?,
        aliases: raw.aliases,
    })
}

/// A remote server's command (the relay): `url`, `headers`, and `env` for the relay.
fn remote_command(
    name: &str,
    kind: &str,
    raw: &Raw,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ChildCommand, String> {
    if raw.command.is_some() || !raw.args.is_empty() || raw.cwd.is_some() {
        return Err(format!(
            "a remote server (\"type\": {kind:?}) is reached at its `url`: leave out command, args and cwd (`env` is given to the relay, e.g. HTTPS_PROXY)"
        ));
    }
    let mut relay_env = Vec::new();
    for (key, value) in &raw.env {
        relay_env.push((key.clone(), expand(value, env)?));
    }
    super::config_remote::command(name, kind, &raw.remote, relay_env, base, env)
}

/// A stdio server's command: `command`, `args`, `env` and `cwd`, expanded and checked.
fn stdio_command(
    name: &str,
    raw: &Raw,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ChildCommand, String> {
    if raw.remote.is_given() {
        return Err("`url`, `headers`, `oauth` and `ca_cert` are a remote server's: give it \"type\": \"http\" (or \"sse\"), or leave them out of a stdio server".into());
    }
    let program = raw
        .command
        .as_deref()
        .ok_or("no `command`: give the program to run, e.g. \"command\": \"npx\"")?;
    let program = expand(program, env)?;
    let mut argv = vec![program];
    for arg in &raw.args {
        argv.push(expand(arg, env)?);
    }
    let mut child_env = Vec::new();
    for (key, value) in &raw.env {
        child_env.push((key.clone(), expand(value, env)?));
    }
    let cwd = match &raw.cwd {
        Some(cwd) => {
            let cwd = PathBuf::from(expand(cwd, env)?);
            let cwd = if cwd.is_absolute() {
                cwd
            } else {
                base.join(cwd)
            };
            if !cwd.is_dir() {
                return Err(format!("cwd {} is not a folder", cwd.display()));
            }
            Some(cwd)
        }
        None => None,
    };
    let command = ChildCommand {
        argv,
        env: child_env,
        cwd,
        server: Some(name.to_owned()),
        env_remove: Vec::new(),
    };
    if super::child::find_program(&command).is_none() {
        return Err(format!(
            "cannot find the command '{}': give a path to an executable, or a program on PATH",
            command.program()
        ));
    }
    Ok(command)
}

fn auth(raw: RawAuth, env: &dyn Fn(&str) -> Option<String>) -> Result<EntryAuth, String> {
    match raw.mode.as_str() {
        "open" => Ok(EntryAuth::Open),
        "token" => {
            let variable = raw
                .token_env
                .ok_or("auth mode \"token\" needs token_env: the environment variable that holds the token")?;
            let token = env(&variable)
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| format!("auth token_env {variable}: the variable is not set"))?;
            if !crate::era::headers::is_visible_ascii(token.as_bytes()) {
                return Err(format!(
                    "auth token_env {variable}: the token must be visible ASCII without spaces"
                ));
            }
            Ok(EntryAuth::Token {
                variable,
                token: Secret::new(token),
            })
        }
        "oauth-issuer" => {
            let issuer = raw.issuer.ok_or(
                "auth mode \"oauth-issuer\" needs issuer: the identity provider's issuer URL",
            )?;
            let issuer = crate::oauth::wellknown::checked(&issuer, "auth issuer")?;
            let audience = raw
                .audience
                .filter(|a| !a.trim().is_empty())
                .ok_or("auth mode \"oauth-issuer\" needs audience: what tokens for this server name in `aud`")?;
            Ok(EntryAuth::Issuer {
                issuer,
                audience,
                scopes: raw.scopes,
            })
        }
        other => Err(format!(
            "auth mode {other:?}: use open, token or oauth-issuer"
        )),
    }
}

#[cfg(test)]
mod tests;
