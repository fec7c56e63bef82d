//! What a rule sees about one request: the principal, where the request goes, what it is
//! about and who sends it, made CEL values with every field present (a rule never fails
//! for a field this request does not have). Values are built directly, not through JSON,
//! and a principal's once (it is the same for every request of a token).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::Value;
use cel::objects::Map;
use serde_json::Value as Json;

/// The caller, as the gateway authenticated it (fixed once made: its CEL value is made
/// from it on first use).
#[derive(Debug, Clone, Default)]
pub struct Principal {
    /// The token's `sub`, the trusted header's user, or none.
    sub: Option<String>,
    /// The token's claims (an object; empty without a token).
    claims: Json,
    scopes: Vec<String>,
    /// The trusted proxy header's user and groups.
    user: Option<String>,
    groups: Vec<String>,
    /// The CEL value, made on first use.
    made: OnceLock<Value>,
}

impl Principal {
    pub fn new(
        sub: Option<String>,
        claims: Json,
        scopes: Vec<String>,
        user: Option<String>,
        groups: Vec<String>,
    ) -> Self {
        Principal {
            sub,
            claims,
            scopes,
            user,
            groups,
            made: OnceLock::new(),
        }
    }

    pub fn sub(&self) -> Option<&str> {
        self.sub.as_deref()
    }

    /// The gateway's shape, `{"sub", "claims", "scopes", "user", "groups"}`: what
    /// `policy check --as` reads and a replica forwards with a request.
    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "sub": self.sub,
            "claims": self.claims,
            "scopes": self.scopes,
            "user": self.user,
            "groups": self.groups,
        })
    }

    /// A principal from the gateway's shape (an object with `claims`), or from a token's
    /// claims as they are (`sub`, and `scope` or `scp` for the scopes). `None` for what is
    /// not an object.
    pub fn from_json(value: &Json) -> Option<Principal> {
        if !value.is_object() {
            return None;
        }
        let strings = |v: Option<&Json>| -> Vec<String> {
            match v {
                Some(Json::Array(items)) => items
                    .iter()
                    .filter_map(Json::as_str)
                    .map(str::to_owned)
                    .collect(),
                Some(Json::String(s)) => s.split_ascii_whitespace().map(str::to_owned).collect(),
                _ => Vec::new(),
            }
        };
        let text_of = |v: Option<&Json>| v.and_then(Json::as_str).map(str::to_owned);
        if let Some(claims) = value.get("claims") {
            return Some(Principal::new(
                text_of(value.get("sub")).or_else(|| text_of(claims.get("sub"))),
                claims.clone(),
                strings(value.get("scopes")),
                text_of(value.get("user")),
                strings(value.get("groups")),
            ));
        }
        let sub = text_of(value.get("sub"));
        let scopes = strings(value.get("scope").or(value.get("scp")));
        Some(Principal::new(sub, value.clone(), scopes, None, Vec::new()))
    }

    fn value(&self) -> Result<Value, String> {
        if let Some(made) = self.made.get() {
            return Ok(made.clone());
        }
        let claims = if self.claims.is_object() {
            cel::to_value(&self.claims).map_err(|e| format!("the token's claims: {e}"))?
        } else {
            map(Vec::new())
        };
        let value = map(vec![
            ("sub", text(self.sub.as_deref().unwrap_or(""))),
            (
                "authenticated",
                Value::Bool(self.sub.is_some() || self.user.is_some()),
            ),
            ("claims", claims),
            ("scopes", list(&self.scopes)),
            ("user", text(self.user.as_deref().unwrap_or(""))),
            ("groups", list(&self.groups)),
        ]);
        Ok(self.made.get_or_init(|| value).clone())
    }
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn list(items: &[String]) -> Value {
    Value::List(Arc::new(items.iter().map(|s| text(s)).collect()))
}

fn map(entries: Vec<(&'static str, Value)>) -> Value {
    Value::Map(Map::from(entries.into_iter().collect::<HashMap<_, _>>()))
}

/// The client application, from its handshake or its 2026-07-28 envelope.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub name: String,
    pub version: String,
    /// `handshake` or `2026-07-28`.
    pub era: String,
}

/// What the request is about.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A tool, with its `annotations` as its server listed them.
    Tool {
        name: &'a str,
        annotations: Option<&'a Json>,
    },
    Resource {
        uri: &'a str,
    },
    Prompt {
        name: &'a str,
    },
    /// Nothing in particular (`ping`, `logging/setLevel`, …).
    Nothing,
}

/// One request's facts.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub principal: &'a Principal,
    /// The server the request goes to (with aggregation, the backend).
    pub server: &'a str,
    /// The endpoint's path.
    pub endpoint: &'a str,
    pub method: &'a str,
    pub target: Target<'a>,
    /// A call's arguments (a prompt's, a completion's), if any.
    pub arguments: Option<&'a Json>,
    pub client: &'a Client,
}

/// A tool's annotations with the MCP defaults filled in (readOnly false, destructive true,
/// idempotent false, openWorld true); for anything but a tool, all false.
fn annotations(given: Option<&Json>, is_tool: bool) -> Value {
    let hint = |key: &'static str, default: bool| {
        let value = given
            .and_then(|a| a.get(key))
            .and_then(Json::as_bool)
            .unwrap_or(default && is_tool);
        (key, Value::Bool(value))
    };
    map(vec![
        hint("readOnlyHint", false),
        hint("destructiveHint", true),
        hint("idempotentHint", false),
        hint("openWorldHint", true),
    ])
}

impl Input<'_> {
    /// The variables a rule sees, by name (`rule::VARIABLES`).
    pub(super) fn variables(&self) -> Result<[(&'static str, Value); 9], String> {
        let (tool, given, uri, prompt) = match self.target {
            Target::Tool { name, annotations } => (name, Some(annotations), "", ""),
            Target::Resource { uri } => ("", None, uri, ""),
            Target::Prompt { name } => ("", None, "", name),
            Target::Nothing => ("", None, "", ""),
        };
        let tool = map(vec![
            ("name", text(tool)),
            ("annotations", annotations(given.flatten(), given.is_some())),
        ]);
        let arguments = match self.arguments.filter(|a| a.is_object()) {
            Some(arguments) => {
                cel::to_value(arguments).map_err(|e| format!("the arguments: {e}"))?
            }
            None => map(Vec::new()),
        };
        let client = map(vec![
            ("name", text(&self.client.name)),
            ("version", text(&self.client.version)),
            ("era", text(&self.client.era)),
        ]);
        Ok([
            ("principal", self.principal.value()?),
            ("server", text(self.server)),
            ("endpoint", text(self.endpoint)),
            ("method", text(self.method)),
            ("tool", tool),
            ("arguments", arguments),
            ("resource", map(vec![("uri", text(uri))])),
            ("prompt", map(vec![("name", text(prompt))])),
            ("client", client),
        ])
    }
}
