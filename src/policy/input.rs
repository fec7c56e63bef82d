//! What a rule sees about one request: the principal, where the request goes, what it is
//! about and who sends it, made CEL values with every field present (a rule never fails
//! for a field this request does not have).

use serde_json::{Value as Json, json};

/// The caller, as the gateway authenticated it.
#[derive(Debug, Clone, Default)]
pub struct Principal {
    /// The token's `sub`, the trusted header's user, or none.
    pub sub: Option<String>,
    /// The token's claims (an object; empty without a token).
    pub claims: Json,
    pub scopes: Vec<String>,
    /// The trusted proxy header's user and groups.
    pub user: Option<String>,
    pub groups: Vec<String>,
}

impl Principal {
    fn value(&self) -> Json {
        let claims = if self.claims.is_object() {
            self.claims.clone()
        } else {
            json!({})
        };
        json!({
            "sub": self.sub.as_deref().unwrap_or(""),
            "authenticated": self.sub.is_some() || self.user.is_some(),
            "claims": claims,
            "scopes": self.scopes,
            "user": self.user.as_deref().unwrap_or(""),
            "groups": self.groups,
        })
    }
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
fn annotations(given: Option<&Json>, is_tool: bool) -> Json {
    let hint = |key: &str, default: bool| {
        given
            .and_then(|a| a.get(key))
            .and_then(Json::as_bool)
            .unwrap_or(default && is_tool)
    };
    json!({
        "readOnlyHint": hint("readOnlyHint", false),
        "destructiveHint": hint("destructiveHint", true),
        "idempotentHint": hint("idempotentHint", false),
        "openWorldHint": hint("openWorldHint", true),
    })
}

impl Input<'_> {
    /// The variables a rule sees, by name (`rule::VARIABLES`).
    pub(super) fn variables(&self) -> [(&'static str, Json); 9] {
        let (tool, uri, prompt) = match self.target {
            Target::Tool {
                name,
                annotations: given,
            } => (
                json!({"name": name, "annotations": annotations(given, true)}),
                "",
                "",
            ),
            Target::Resource { uri } => (
                json!({"name": "", "annotations": annotations(None, false)}),
                uri,
                "",
            ),
            Target::Prompt { name } => (
                json!({"name": "", "annotations": annotations(None, false)}),
                "",
                name,
            ),
            Target::Nothing => (
                json!({"name": "", "annotations": annotations(None, false)}),
                "",
                "",
            ),
        };
        let arguments = self
            .arguments
            .filter(|a| a.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        [
            ("principal", self.principal.value()),
            ("server", json!(self.server)),
            ("endpoint", json!(self.endpoint)),
            ("method", json!(self.method)),
            ("tool", tool),
            ("arguments", arguments),
            ("resource", json!({"uri": uri})),
            ("prompt", json!({"name": prompt})),
            (
                "client",
                json!({"name": self.client.name, "version": self.client.version, "era": self.client.era}),
            ),
        ]
    }
}
