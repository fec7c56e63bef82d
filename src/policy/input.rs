//! What a rule sees about one request: the principal, where the request goes, what it is
//! about and who sends it, made CEL values with every field present (a rule never fails
//! for a field this request does not have). Values are built directly, not through JSON,
//! and a principal's once (it is the same for every request of a token).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::Value;
use cel::objects::{Key, Map};
use serde_json::Value as Json;

use super::memo::{Memo, ShapeRef};
use super::names::Reach;

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
    /// Its fields as CEL values, made on first use.
    made: OnceLock<Made>,
    /// The verdicts of the rules that do not read arguments, per request shape.
    memo: Memo,
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
            memo: Memo::default(),
        }
    }

    pub(super) fn memo(&self) -> &Memo {
        &self.memo
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

    /// Its fields under their qualified names (`principal.groups`), made once: the
    /// evaluator finds a qualified name as it is, where a map variable would be converted
    /// (copied) on every access.
    fn made(&self) -> Result<&Made, String> {
        if let Some(made) = self.made.get() {
            return Ok(made);
        }
        let claims = if self.claims.is_object() {
            cel::to_value(&self.claims).map_err(|e| format!("the token's claims: {e}"))?
        } else {
            map(Vec::new())
        };
        let fields = vec![
            ("principal.sub", text(self.sub.as_deref().unwrap_or(""))),
            (
                "principal.authenticated",
                Value::Bool(self.sub.is_some() || self.user.is_some()),
            ),
            ("principal.claims", claims),
            ("principal.scopes", list(&self.scopes)),
            ("principal.user", text(self.user.as_deref().unwrap_or(""))),
            ("principal.groups", list(&self.groups)),
        ];
        let values = [
            ("principal.claims", values_in(&self.claims, usize::MAX)),
            ("principal.scopes", self.scopes.len()),
            ("principal.groups", self.groups.len()),
        ];
        Ok(self.made.get_or_init(|| Made { fields, values }))
    }
}

/// A principal's fields as CEL values, and how many values each list or map holds (held
/// to `--policy-max-items` where a rule reads it).
#[derive(Debug, Clone)]
struct Made {
    fields: Vec<(&'static str, Value)>,
    values: [(&'static str, usize); 3],
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

/// The annotation hints a rule sees, with the MCP defaults.
const HINTS: [(&str, bool); 4] = [
    ("tool.annotations.readOnlyHint", false),
    ("tool.annotations.destructiveHint", true),
    ("tool.annotations.idempotentHint", false),
    ("tool.annotations.openWorldHint", true),
];

/// A tool's annotation hints with the MCP defaults filled in (readOnly false, destructive
/// true, idempotent false, openWorld true); for anything but a tool, all false.
pub(super) fn hint_values(given: Option<&Json>, is_tool: bool) -> [bool; 4] {
    HINTS.map(|(name, default)| {
        given
            .and_then(|a| a.get(short(name)))
            .and_then(Json::as_bool)
            .unwrap_or(default && is_tool)
    })
}

fn annotations(given: Option<&Json>, is_tool: bool) -> [(&'static str, Value); 4] {
    let values = hint_values(given, is_tool);
    [0, 1, 2, 3].map(|i| (HINTS[i].0, Value::Bool(values[i])))
}

/// `arguments` as the rules see it: all of it when some rule uses the map itself, else only
/// the fields they name (a large argument no rule reads is never converted).
fn arguments_value(arguments: &Json, reach: &Reach, max_items: usize) -> Result<Value, String> {
    let too_many = || {
        format!(
            "its arguments hold more than --policy-max-items ({max_items}) values where the rules read them; send fewer, or ask the operator to raise it"
        )
    };
    let convert = |value: &Json| cel::to_value(value).map_err(|e| format!("the arguments: {e}"));
    if reach.whole_arguments() {
        if values_in(arguments, max_items) > max_items {
            return Err(too_many());
        }
        return convert(arguments);
    }
    let mut fields = HashMap::new();
    let mut held = 0usize;
    for field in reach.argument_fields() {
        if let Some(value) = arguments.get(field.as_str()) {
            held = held.saturating_add(values_in(value, max_items));
            if held > max_items {
                return Err(too_many());
            }
            fields.insert(Key::from(field.clone()), convert(value)?);
        }
    }
    Ok(Value::Map(Map {
        map: Arc::new(fields),
    }))
}

/// The list items and map entries in `value` at any depth, counted up to just past
/// `limit` (a huge value is not walked to its end).
fn values_in(value: &Json, limit: usize) -> usize {
    let mut count = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Json::Array(items) => {
                count = count.saturating_add(items.len());
                if count > limit {
                    return count;
                }
                pending.extend(items.iter());
            }
            Json::Object(entries) => {
                count = count.saturating_add(entries.len());
                if count > limit {
                    return count;
                }
                pending.extend(entries.values());
            }
            _ => {}
        }
    }
    count
}

/// A qualified name's last segment.
fn short(name: &'static str) -> &'static str {
    name.rsplit('.').next().unwrap_or(name)
}

impl Input<'_> {
    /// What a rule that cannot read `arguments` sees of this request besides its
    /// principal (`memo.rs`); `None` when it is too long to remember.
    pub(super) fn shape(&self) -> Option<ShapeRef<'_>> {
        let target = match self.target {
            Target::Tool { name, annotations } => (0, name, Some(hint_values(annotations, true))),
            Target::Resource { uri } => (1, uri, None),
            Target::Prompt { name } => (2, name, None),
            Target::Nothing => (3, "", None),
        };
        ShapeRef::new(
            self.server,
            self.endpoint,
            self.method,
            target,
            [&self.client.name, &self.client.version, &self.client.era],
        )
    }

    /// What a rule sees (`rule::VARIABLES`): the scalars and `arguments` by name, the
    /// fixed fields of the others by their qualified names (`tool.name`,
    /// `tool.annotations.readOnlyHint`, `principal.groups`), which the evaluator resolves
    /// without opening a map. Only the variables `wanted` names are made: a decision's
    /// scope holds no others.
    /// A request whose `arguments` (the parts the rules read) or whose caller holds more
    /// than `max_items` values is not judged: the rules' cost was reckoned with that bound.
    pub(super) fn variables(
        &self,
        reach: &Reach,
        max_items: usize,
    ) -> Result<Vec<(&'static str, Value)>, String> {
        let wanted = |name: &str| reach.contains(name);
        let (tool, given, uri, prompt) = match self.target {
            Target::Tool { name, annotations } => (name, Some(annotations), "", ""),
            Target::Resource { uri } => ("", None, uri, ""),
            Target::Prompt { name } => ("", None, "", name),
            Target::Nothing => ("", None, "", ""),
        };
        let arguments = match self
            .arguments
            .filter(|a| a.is_object() && wanted("arguments"))
        {
            Some(arguments) => arguments_value(arguments, reach, max_items)?,
            None => map(Vec::new()),
        };
        let hints = annotations(given.flatten(), given.is_some());
        let mut variables = Vec::with_capacity(24);
        let principal = self.principal.made()?;
        if let Some((name, held)) = principal
            .values
            .iter()
            .find(|(name, held)| *held > max_items && wanted(name))
        {
            return Err(format!(
                "the caller's {} hold {held} values, more than --policy-max-items ({max_items})",
                name.trim_start_matches("principal.")
            ));
        }
        variables.extend(
            principal
                .fields
                .iter()
                .filter(|(name, _)| wanted(name))
                .cloned(),
        );
        let mut add = |name: &'static str, make: &dyn Fn() -> Value| {
            if wanted(name) {
                variables.push((name, make()));
            }
        };
        add("server", &|| text(self.server));
        add("endpoint", &|| text(self.endpoint));
        add("method", &|| text(self.method));
        add("tool.name", &|| text(tool));
        add("tool.annotations", &|| {
            map(hints.iter().map(|(k, v)| (short(k), v.clone())).collect())
        });
        add("resource.uri", &|| text(uri));
        add("prompt.name", &|| text(prompt));
        add("client.name", &|| text(&self.client.name));
        add("client.version", &|| text(&self.client.version));
        add("client.era", &|| text(&self.client.era));
        for (name, value) in &hints {
            add(name, &|| value.clone());
        }
        if wanted("arguments") {
            variables.push(("arguments", arguments));
        }
        Ok(variables)
    }
}
