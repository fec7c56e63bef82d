//! The aggregate endpoints a `--config` file names: `aggregate = true` (as `--aggregate`:
//! every server at `--path`) and `[aggregates.NAME]` tables (`path`, `servers`,
//! `separator`, `fail`), checked against the file's servers; with the command line's
//! aggregate flags they become each endpoint's `AggregateSpec`. Pure.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::aggregate::names::{Aliases, check_separator, check_server_names};
use super::aggregate::uris::UriPrefixes;
use super::aggregator::{AggregateFlags, AggregateSpec};

/// A server of the file as the aggregates see it: its name, its aliases, and whether it
/// checks its callers its own way (an `auth` of `token` or `oauth-issuer`).
pub type Server<'a> = (&'a str, &'a BTreeMap<String, String>, bool);

/// Paths serve answers itself.
const RESERVED: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// One aggregate endpoint as the file writes it (unset keys take the flags' values).
#[derive(Debug, Clone, PartialEq)]
pub struct FileAggregate {
    pub name: String,
    pub path: Option<String>,
    pub servers: Option<Vec<String>>,
    pub separator: Option<String>,
    pub fail_closed: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    path: Option<String>,
    servers: Option<Vec<String>>,
    separator: Option<String>,
    fail: Option<String>,
}

const KNOWN: &str = "path, servers, separator, fail";

/// The name `--aggregate` (and the file's `aggregate = true`) gives its endpoint.
pub const AT_PATH: &str = "aggregate";

/// The file's aggregate endpoints; `aggregate = true` is one named `aggregate` whose
/// path is `--path`.
pub fn parse(document: &Value, names: &[&str]) -> Result<Vec<FileAggregate>, String> {
    let mut found = Vec::new();
    match document.get("aggregate") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => found.push(FileAggregate {
            name: AT_PATH.into(),
            path: None,
            servers: None,
            separator: None,
            fail_closed: None,
        }),
        Some(other) => {
            return Err(format!(
                "aggregate = {other}: use true (every server also at --path) or false"
            ));
        }
    }
    let tables = match document.get("aggregates") {
        None => return Ok(found),
        Some(Value::Object(tables)) => tables,
        Some(_) => {
            return Err(
                "aggregates: write each as a table, [aggregates.NAME], with path and servers"
                    .into(),
            );
        }
    };
    for (name, value) in tables {
        let raw: Raw = serde_json::from_value(value.clone())
            .map_err(|e| format!("aggregate {name:?}: {e}; its keys are {KNOWN}"))?;
        if name == AT_PATH {
            return Err(format!(
                "aggregate {name:?}: that name is --aggregate's; choose another"
            ));
        }
        if let Some(servers) = &raw.servers {
            if servers.is_empty() {
                return Err(format!(
                    "aggregate {name:?}: servers is empty; name at least one of the file's servers, or leave it out for all"
                ));
            }
            if let Some(unknown) = servers.iter().find(|s| !names.contains(&s.as_str())) {
                return Err(format!(
                    "aggregate {name:?}: no server is named {unknown:?}; the file's servers are {}",
                    names.join(", ")
                ));
            }
        }
        let fail_closed = match raw.fail.as_deref() {
            None => None,
            Some("open") => Some(false),
            Some("closed") => Some(true),
            Some(other) => {
                return Err(format!(
                    "aggregate {name:?}: fail {other:?}: use open or closed"
                ));
            }
        };
        found.push(FileAggregate {
            name: name.clone(),
            path: raw.path,
            servers: raw.servers,
            separator: raw.separator,
            fail_closed,
        });
    }
    Ok(found)
}

/// Every aggregate endpoint to serve: the file's, with `--aggregate`'s at `path` when the
/// flag is given (or the file says `aggregate = true`), checked: paths unique and none a
/// server's own, separators usable.
pub fn specs(
    file: &[FileAggregate],
    entries: &[Server<'_>],
    flags: &AggregateFlags,
    path: &str,
) -> Result<Vec<AggregateSpec>, String> {
    let mut wanted: Vec<FileAggregate> = file.to_vec();
    if flags.at_path && !wanted.iter().any(|a| a.name == AT_PATH) {
        wanted.insert(
            0,
            FileAggregate {
                name: AT_PATH.into(),
                path: None,
                servers: None,
                separator: None,
                fail_closed: None,
            },
        );
    }
    let mut specs: Vec<AggregateSpec> = Vec::new();
    for aggregate in wanted {
        let name = &aggregate.name;
        let path = match (&aggregate.path, name.as_str()) {
            (Some(path), _) => path.clone(),
            (None, AT_PATH) => path.to_owned(),
            (None, _) => format!("/{name}/mcp"),
        };
        if !path.starts_with('/') || path.contains(['?', '#']) || path.len() < 2 {
            return Err(format!(
                "aggregate {name:?}: path {path:?} must be a path starting with '/', e.g. /team/mcp"
            ));
        }
        if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(&path))
            || path.to_ascii_lowercase().starts_with("/.well-known/")
        {
            return Err(format!(
                "aggregate {name:?}: path {path} is one serve answers itself; give the aggregate another path, e.g. /mcp"
            ));
        }
        if let Some((server, _, _)) = entries
            .iter()
            .find(|(e, _, _)| format!("/{e}/mcp").eq_ignore_ascii_case(&path))
        {
            return Err(format!(
                "aggregate {name:?}: path {path} is where the server {server:?} is served; give the aggregate another path"
            ));
        }
        if let Some(other) = specs.iter().find(|s| s.path.eq_ignore_ascii_case(&path)) {
            return Err(format!(
                "aggregates {:?} and {name:?} both want the path {path}; give one another path",
                other.name
            ));
        }
        let separator = aggregate
            .separator
            .clone()
            .unwrap_or_else(|| flags.separator.clone());
        check_separator(&separator).map_err(|e| format!("aggregate {name:?}: {e}"))?;
        let servers = aggregate
            .servers
            .clone()
            .unwrap_or_else(|| entries.iter().map(|(e, _, _)| (*e).to_owned()).collect());
        if let Some((own, _, _)) = entries
            .iter()
            .find(|(e, _, checks)| *checks && servers.iter().any(|s| s == e))
        {
            return Err(format!(
                "aggregate {name:?}: the server {own:?} checks its callers its own way (its `auth`), and an aggregate checks them the command line's way, so it would let them past: name the aggregate's `servers` without it, or give the command line the same check and leave out the server's `auth`"
            ));
        }
        check_server_names(&servers, &separator).map_err(|e| format!("aggregate {name:?}: {e}"))?;
        UriPrefixes::new(&servers).map_err(|e| format!("aggregate {name:?}: {e}"))?;
        specs.push(AggregateSpec {
            name: name.clone(),
            path,
            aliases: aliases(entries, &servers),
            servers,
            separator,
            fail_closed: aggregate.fail_closed.unwrap_or(flags.fail_closed),
        });
    }
    Ok(specs)
}

/// The aliases the servers' entries give.
fn aliases(entries: &[Server<'_>], servers: &[String]) -> Aliases {
    entries
        .iter()
        .filter(|(name, _, _)| servers.iter().any(|s| s == name))
        .flat_map(|(name, aliases, _)| {
            aliases
                .iter()
                .map(|(own, public)| (((*name).to_owned(), own.clone()), public.clone()))
        })
        .collect()
}
