//! What `check` found, as one serializable report (`--json`) and as the text a person
//! reads. No field ever holds a token: the report says which credential was used, never
//! its value.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use serde_json::Value;

use super::wire::Step;

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub url: String,
    /// True when the server answered as an MCP server.
    pub ok: bool,
    /// `streamable-http` or `sse` (the 2024-11-05 HTTP+SSE transport).
    pub transport: Option<&'static str>,
    /// `2026-07-28` (stateless, found with `server/discover`) or `handshake`.
    pub era: Option<&'static str>,
    /// The revision in use: the modern one, or what `initialize` negotiated.
    pub protocol_version: Option<String>,
    pub server: Option<ServerInfo>,
    pub capabilities: Option<Value>,
    /// Whether the server gave `instructions`.
    pub instructions: bool,
    /// `tools`, `resources`, `resource_templates`, `prompts`: for what the server offers.
    pub counts: BTreeMap<&'static str, Count>,
    pub auth: Auth,
    pub timings: Timings,
    /// Why the check failed, when it did.
    pub error: Option<String>,
    /// One line saying what would help.
    pub hint: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct ServerInfo {
    pub name: Option<String>,
    pub version: Option<String>,
    pub title: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Count {
    /// Items on the first page.
    pub first_page: usize,
    /// Items on every page read.
    pub total: usize,
    pub pages: usize,
    /// False when `--max-pages` stopped the count or a page failed.
    pub complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Auth {
    /// The server refused a request without credentials.
    pub required: bool,
    /// `none`, `stored-login`, `bearer-token` or `header` (never the value).
    pub credential: &'static str,
    /// Where the protected resource metadata was announced or found.
    pub resource_metadata: Option<String>,
    /// The resource its metadata names.
    pub resource: Option<String>,
    pub authorization_servers: Vec<String>,
    /// The authorization server discovery settled on.
    pub issuer: Option<String>,
    pub scopes_supported: Option<Vec<String>>,
    /// What the challenge asked for.
    pub scope_challenged: Option<String>,
    pub grant_types_supported: Option<Vec<String>>,
    /// Dynamic client registration (RFC 7591): a registration endpoint is published.
    pub dynamic_registration: bool,
    /// Client ID Metadata Documents are accepted as client ids.
    pub client_id_metadata_documents: bool,
    /// The device authorization grant (RFC 8628) has an endpoint.
    pub device_flow: bool,
    /// No metadata at all: the 2025-03-26 defaults at the server's origin are in use.
    pub legacy_defaults: bool,
    pub login: Option<Login>,
    /// Why discovery could not finish, when it could not.
    pub problem: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Login {
    pub issuer: String,
    pub client_id: String,
    pub scope: Option<String>,
    /// Seconds until the access token expires (negative: expired), if it says.
    pub expires_in_s: Option<i64>,
    pub refreshable: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct Timings {
    pub total_ms: f64,
    pub steps: Vec<Step>,
}

/// The report as text for a terminal.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let line = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "  {label:<20}{value}");
    };
    let _ = writeln!(out, "mcp-stdio check {}", report.url);
    let answered = if report.ok {
        format!("yes, in {:.1} ms", report.timings.total_ms)
    } else {
        "no".to_owned()
    };
    line(&mut out, "answered", &answered);
    if let Some(transport) = report.transport {
        let name = match transport {
            "sse" => "HTTP+SSE (2024-11-05)",
            _ => "Streamable HTTP",
        };
        line(&mut out, "transport", name);
    }
    if let Some(era) = report.era {
        let version = report.protocol_version.as_deref().unwrap_or("?");
        let value = match era {
            "handshake" => format!("handshake (negotiated {version})"),
            _ => format!("{version} (stateless, server/discover)"),
        };
        line(&mut out, "era", &value);
    }
    if let Some(server) = &report.server {
        let name = server.name.as_deref().unwrap_or("(unnamed)");
        let version = server.version.as_deref().unwrap_or("");
        line(&mut out, "server", format!("{name} {version}").trim_end());
    }
    if let Some(capabilities) = report.capabilities.as_ref().and_then(Value::as_object) {
        let names: Vec<String> = capabilities
            .iter()
            .map(|(name, value)| {
                let flags: Vec<&str> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| v.as_bool() == Some(true))
                    .map(|(k, _)| k.as_str())
                    .collect();
                if flags.is_empty() {
                    name.clone()
                } else {
                    format!("{name} ({})", flags.join(", "))
                }
            })
            .collect();
        let value = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        line(&mut out, "capabilities", &value);
    }
    let order = ["tools", "resources", "resource_templates", "prompts"];
    let mut counts: Vec<(&&str, &Count)> = report.counts.iter().collect();
    counts.sort_by_key(|(what, _)| order.iter().position(|o| o == *what));
    for (what, count) in counts {
        let mut value = format!("{}", count.total);
        if !count.complete {
            value.push_str(" or more");
        }
        if count.pages > 1 {
            let _ = write!(
                value,
                " (first page {}, {} pages)",
                count.first_page, count.pages
            );
        }
        if let Some(error) = &count.error {
            let _ = write!(value, " [{error}]");
        }
        line(&mut out, &what.replace('_', " "), &value);
    }
    line(&mut out, "auth", &auth_text(&report.auth));
    if !report.timings.steps.is_empty() {
        let steps: Vec<String> = report
            .timings
            .steps
            .iter()
            .map(|s| match s.status {
                Some(status) => format!("{} {:.1} ms (HTTP {status})", s.step, s.ms),
                None => format!("{} {:.1} ms", s.step, s.ms),
            })
            .collect();
        line(&mut out, "timings", &steps.join("; "));
    }
    if let Some(error) = &report.error {
        line(&mut out, "error", error);
    }
    if let Some(hint) = &report.hint {
        let _ = writeln!(out, "→ {hint}");
    }
    out
}

fn auth_text(auth: &Auth) -> String {
    if !auth.required {
        return match auth.credential {
            "none" => "none needed".to_owned(),
            other => format!("none needed (sent a {other} anyway)"),
        };
    }
    let mut parts = vec![format!("required; used: {}", auth.credential)];
    if !auth.authorization_servers.is_empty() {
        parts.push(format!(
            "authorization server {}",
            auth.authorization_servers.join(", ")
        ));
    }
    if let Some(grants) = &auth.grant_types_supported {
        parts.push(format!("grants {}", grants.join(" ")));
    }
    let mut ways = Vec::new();
    if auth.dynamic_registration {
        ways.push("dynamic registration");
    }
    if auth.client_id_metadata_documents {
        ways.push("client metadata documents");
    }
    if auth.device_flow {
        ways.push("device flow");
    }
    if !ways.is_empty() {
        parts.push(ways.join(", "));
    }
    if let Some(scopes) = &auth.scopes_supported {
        parts.push(format!("scopes {}", scopes.join(" ")));
    }
    if let Some(login) = &auth.login {
        let expiry = match login.expires_in_s {
            Some(s) if s < 0 => " (expired)".to_owned(),
            Some(s) => format!(" (expires in {s} s)"),
            None => String::new(),
        };
        parts.push(format!("stored login at {}{expiry}", login.issuer));
    }
    if let Some(problem) = &auth.problem {
        parts.push(format!("discovery: {problem}"));
    }
    parts.join("; ")
}
