//! Where a client's request goes at the aggregate endpoint: to the one backend its name or
//! URI leads to (with its params rewritten to the backend's own name or URI), to every
//! backend, or to the gateway's merged lists. Pure: the tables are given.

use serde_json::{Map, Value};

use super::names::NameTable;
use super::uris::UriPrefixes;

/// The lists the gateway answers itself, from every backend's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// To this backend (by index), with these params.
    One { server: usize, params: Value },
    /// To every backend (`ping`, `logging/setLevel`); the gateway answers once.
    Every,
    /// The gateway's merged list.
    Merged(List),
}

/// Why a request has nowhere to go: a JSON-RPC error the client is told (-32602).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unroutable(pub String);

pub struct Tables<'a> {
    pub tools: &'a NameTable,
    pub prompts: &'a NameTable,
    pub uris: &'a UriPrefixes,
}

/// The target of a request `method` with `params`; `None` for a method the aggregate does
/// not route (the caller answers it: `initialize`, `server/discover`, or method not found).
pub fn route(
    method: &str,
    params: Option<&Value>,
    tables: &Tables<'_>,
) -> Option<Result<Target, Unroutable>> {
    let target = match method {
        "tools/list" => Ok(Target::Merged(List::Tools)),
        "prompts/list" => Ok(Target::Merged(List::Prompts)),
        "resources/list" => Ok(Target::Merged(List::Resources)),
        "resources/templates/list" => Ok(Target::Merged(List::ResourceTemplates)),
        "ping" | "logging/setLevel" => Ok(Target::Every),
        "tools/call" => by_name(params, tables.tools, "tool", "tools/list"),
        "prompts/get" => by_name(params, tables.prompts, "prompt", "prompts/list"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            by_uri(params, "uri", tables.uris)
        }
        "completion/complete" => completion(params, tables),
        _ => return None,
    };
    Some(target)
}

fn object(params: Option<&Value>) -> Result<&Map<String, Value>, Unroutable> {
    params
        .and_then(Value::as_object)
        .ok_or_else(|| Unroutable("Invalid params: params must be an object".into()))
}

fn by_name(
    params: Option<&Value>,
    table: &NameTable,
    what: &str,
    list: &str,
) -> Result<Target, Unroutable> {
    let (server, params) = named(object(params)?, table, what, list)?;
    Ok(Target::One {
        server,
        params: Value::Object(params),
    })
}

/// The backend a name leads to, and `params` with the backend's own name in it.
fn named(
    params: &Map<String, Value>,
    table: &NameTable,
    what: &str,
    list: &str,
) -> Result<(usize, Map<String, Value>), Unroutable> {
    let Some(public) = params.get("name").and_then(Value::as_str) else {
        return Err(Unroutable(format!(
            "Invalid params: name the {what} (\"name\")"
        )));
    };
    let Some((server, name)) = table.route(public) else {
        return Err(Unroutable(format!(
            "Invalid params: no {what} is named {public:?} at this endpoint; {list} gives the names (each is SERVER, a separator, then the server's own name)"
        )));
    };
    let mut params = params.clone();
    params.insert("name".into(), Value::String(name.to_owned()));
    Ok((server, params))
}

fn by_uri(params: Option<&Value>, key: &str, uris: &UriPrefixes) -> Result<Target, Unroutable> {
    let params = object(params)?;
    let Some(public) = params.get(key).and_then(Value::as_str) else {
        return Err(Unroutable(format!(
            "Invalid params: give the resource's \"{key}\""
        )));
    };
    let Some((server, uri)) = uris.restore(public) else {
        return Err(not_published(public));
    };
    let mut params = params.clone();
    params.insert(key.into(), Value::String(uri.to_owned()));
    Ok(Target::One {
        server,
        params: Value::Object(params),
    })
}

fn not_published(uri: &str) -> Unroutable {
    Unroutable(format!(
        "Invalid params: {uri:?} is not a resource of this endpoint; resources/list gives their URIs (each starts with its server's prefix and '+')"
    ))
}

/// `completion/complete` goes where its reference leads: a prompt by name, a resource
/// template by URI.
fn completion(params: Option<&Value>, tables: &Tables<'_>) -> Result<Target, Unroutable> {
    let params = object(params)?;
    let reference = params
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            Unroutable("Invalid params: give \"ref\", a ref/prompt or a ref/resource".into())
        })?;
    let (server, reference) = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let (server, reference) = named(reference, tables.prompts, "prompt", "prompts/list")?;
            (server, Value::Object(reference))
        }
        Some("ref/resource") => {
            let public = reference
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (server, uri) = tables
                .uris
                .restore(public)
                .ok_or_else(|| not_published(public))?;
            let mut reference = reference.clone();
            reference.insert("uri".into(), Value::String(uri.to_owned()));
            (server, Value::Object(reference))
        }
        _ => {
            return Err(Unroutable(
                "Invalid params: \"ref\" must be a ref/prompt or a ref/resource".into(),
            ));
        }
    };
    let mut params = params.clone();
    params.insert("ref".into(), reference);
    Ok(Target::One {
        server,
        params: Value::Object(params),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::aggregate::names::{Aliases, DEFAULT_SEPARATOR};
    use serde_json::json;

    struct Fixture {
        tools: NameTable,
        prompts: NameTable,
        uris: UriPrefixes,
    }

    fn fixture() -> Fixture {
        let servers = vec!["everything".to_string(), "memory".into()];
        let list = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (tools, _) = NameTable::build(
            &servers,
            &[list(&["echo"]), list(&["read_graph"])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        let (prompts, _) = NameTable::build(
            &servers,
            &[list(&["simple_prompt"]), list(&[])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        Fixture {
            tools,
            prompts,
            uris: UriPrefixes::new(&servers).unwrap(),
        }
    }

    fn go(fixture: &Fixture, method: &str, params: Value) -> Result<Target, Unroutable> {
        let tables = Tables {
            tools: &fixture.tools,
            prompts: &fixture.prompts,
            uris: &fixture.uris,
        };
        route(method, Some(&params), &tables).expect("routed")
    }

    #[test]
    fn a_call_goes_to_its_backend_under_the_backends_name() {
        let f = fixture();
        let target = go(
            &f,
            "tools/call",
            json!({"name": "memory__read_graph", "arguments": {"a": 1}, "_meta": {"progressToken": 7}}),
        );
        assert_eq!(
            target,
            Ok(Target::One {
                server: 1,
                params: json!({"name": "read_graph", "arguments": {"a": 1}, "_meta": {"progressToken": 7}})
            })
        );
        let target = go(
            &f,
            "prompts/get",
            json!({"name": "everything__simple_prompt"}),
        );
        assert_eq!(
            target,
            Ok(Target::One {
                server: 0,
                params: json!({"name": "simple_prompt"})
            })
        );
    }

    #[test]
    fn unknown_names_and_uris_say_where_the_names_are() {
        let f = fixture();
        let Err(Unroutable(why)) = go(&f, "tools/call", json!({"name": "echo"})) else {
            panic!("an unprefixed name routed");
        };
        assert!(
            why.contains("\"echo\"") && why.contains("tools/list"),
            "{why}"
        );
        let Err(Unroutable(why)) = go(&f, "resources/read", json!({"uri": "file:///etc/passwd"}))
        else {
            panic!("a foreign URI routed");
        };
        assert!(why.contains("resources/list"), "{why}");
        assert!(go(&f, "tools/call", json!([1])).is_err());
        assert!(go(&f, "tools/call", json!({})).is_err());
    }

    #[test]
    fn reads_subscriptions_and_completions_follow_the_uri_or_the_prompt() {
        let f = fixture();
        for method in [
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
        ] {
            assert_eq!(
                go(&f, method, json!({"uri": "memory+memory://graph"})),
                Ok(Target::One {
                    server: 1,
                    params: json!({"uri": "memory://graph"})
                })
            );
        }
        assert_eq!(
            go(
                &f,
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "everything__simple_prompt"}, "argument": {"name": "a", "value": "x"}})
            ),
            Ok(Target::One {
                server: 0,
                params: json!({"ref": {"type": "ref/prompt", "name": "simple_prompt"}, "argument": {"name": "a", "value": "x"}})
            })
        );
        assert_eq!(
            go(
                &f,
                "completion/complete",
                json!({"ref": {"type": "ref/resource", "uri": "everything+test://static/resource/{id}"}})
            ),
            Ok(Target::One {
                server: 0,
                params: json!({"ref": {"type": "ref/resource", "uri": "test://static/resource/{id}"}})
            })
        );
        assert!(
            go(
                &f,
                "completion/complete",
                json!({"ref": {"type": "ref/other"}})
            )
            .is_err()
        );
    }

    #[test]
    fn lists_are_merged_and_pings_fan_out() {
        let f = fixture();
        assert_eq!(
            go(&f, "tools/list", json!({})),
            Ok(Target::Merged(List::Tools))
        );
        assert_eq!(
            go(&f, "resources/templates/list", json!({})),
            Ok(Target::Merged(List::ResourceTemplates))
        );
        assert_eq!(
            go(&f, "logging/setLevel", json!({"level": "info"})),
            Ok(Target::Every)
        );
        let tables = Tables {
            tools: &f.tools,
            prompts: &f.prompts,
            uris: &f.uris,
        };
        assert_eq!(route("initialize", None, &tables), None);
    }
}
