//! The aggregate endpoint's merged lists and rewritten results: every backend's tools and
//! prompts under their published names, resources and templates under their published
//! URIs, and the resource links and embedded resources in a result published the same way.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::names::{Aliases, NameTable, Refused};
use super::uris::UriPrefixes;

/// Tools or prompts of every backend (`lists[i]` from `servers[i]`, in the backend's
/// order), each under its published name, with the table that routes them back and what
/// could not be published. An item without a string `name` is refused too.
pub fn publish_named(
    servers: &[String],
    lists: &[Vec<Value>],
    separator: &str,
    aliases: &Aliases,
) -> (Vec<Value>, NameTable, Vec<Refused>) {
    let mut refused = Vec::new();
    let listed: Vec<Vec<String>> = lists
        .iter()
        .enumerate()
        .map(|(index, items)| {
            items
                .iter()
                .filter_map(|item| match item.get("name").and_then(Value::as_str) {
                    Some(name) => Some(name.to_owned()),
                    None => {
                        refused.push(Refused {
                            server: servers[index].clone(),
                            name: String::new(),
                            why: "the backend listed an item without a name".into(),
                        });
                        None
                    }
                })
                .collect()
        })
        .collect();
    let (table, mut not_published) = NameTable::build(servers, &listed, separator, aliases);
    refused.append(&mut not_published);
    let mut published = Vec::new();
    let mut seen = HashSet::new();
    for (index, items) in lists.iter().enumerate() {
        for item in items {
            let Some(name) = item.get("name").and_then(Value::as_str) else {
                continue;
            };
            let Some(public) = table.public(index, name) else {
                continue;
            };
            if !seen.insert(public) {
                continue; // listed twice by its backend: once here
            }
            let mut item = item.clone();
            item["name"] = Value::String(public.to_owned());
            published.push(item);
        }
    }
    (published, table, refused)
}

/// Resources (`key` "uri") or resource templates (`key` "uriTemplate") of every backend,
/// each under its published URI; an item without that key is left out.
pub fn publish_resources(prefixes: &UriPrefixes, lists: &[Vec<Value>], key: &str) -> Vec<Value> {
    let mut published = Vec::new();
    for (index, items) in lists.iter().enumerate() {
        for item in items {
            let Some(uri) = item.get(key).and_then(Value::as_str) else {
                continue;
            };
            let mut item = item.clone();
            item[key] = Value::String(prefixes.publish(index, uri));
            published.push(item);
        }
    }
    published
}

/// Publishes the URIs a backend's result carries in its content (resource links and
/// embedded resources, in a tool result's `content` or a prompt's `messages`).
pub fn publish_result_uris(prefixes: &UriPrefixes, server: usize, result: &mut Value) {
    let rewrite = |item: &mut Map<String, Value>| match item.get("type").and_then(Value::as_str) {
        Some("resource_link") => publish_uri_at(prefixes, server, item),
        Some("resource") => {
            if let Some(Value::Object(resource)) = item.get_mut("resource") {
                publish_uri_at(prefixes, server, resource);
            }
        }
        _ => {}
    };
    if let Some(Value::Array(content)) = result.get_mut("content") {
        content
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .for_each(rewrite);
    }
    if let Some(Value::Array(messages)) = result.get_mut("messages") {
        for message in messages {
            match message.get_mut("content") {
                Some(Value::Object(item)) => rewrite(item),
                Some(Value::Array(items)) => items
                    .iter_mut()
                    .filter_map(Value::as_object_mut)
                    .for_each(rewrite),
                _ => {}
            }
        }
    }
    // `resources/read` answers: each content's own URI.
    if let Some(Value::Array(contents)) = result.get_mut("contents") {
        for item in contents.iter_mut().filter_map(Value::as_object_mut) {
            publish_uri_at(prefixes, server, item);
        }
    }
}

fn publish_uri_at(prefixes: &UriPrefixes, server: usize, item: &mut Map<String, Value>) {
    if let Some(Value::String(uri)) = item.get_mut("uri") {
        *uri = prefixes.publish(server, uri);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::aggregate::names::DEFAULT_SEPARATOR;
    use serde_json::json;

    fn servers() -> Vec<String> {
        vec!["everything".into(), "memory".into()]
    }

    #[test]
    fn tools_are_published_in_order_with_their_schemas() {
        let lists = vec![
            vec![
                json!({"name": "echo", "inputSchema": {"type": "object"}}),
                json!({"name": "add", "title": "Add"}),
            ],
            vec![json!({"name": "read_graph"}), json!({"title": "nameless"})],
        ];
        let (published, table, refused) =
            publish_named(&servers(), &lists, DEFAULT_SEPARATOR, &Aliases::new());
        let names: Vec<&str> = published
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["everything__echo", "everything__add", "memory__read_graph"]
        );
        assert_eq!(published[0]["inputSchema"], json!({"type": "object"}));
        assert_eq!(published[1]["title"], "Add");
        assert_eq!(table.route("memory__read_graph"), Some((1, "read_graph")));
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].server, "memory");
    }

    #[test]
    fn resources_and_templates_get_published_uris() {
        let prefixes = UriPrefixes::new(&servers()).unwrap();
        let lists = vec![
            vec![json!({"uri": "test://static/resource/1", "name": "Resource 1"})],
            vec![
                json!({"uri": "memory://graph", "name": "graph"}),
                json!({"name": "no uri"}),
            ],
        ];
        let published = publish_resources(&prefixes, &lists, "uri");
        assert_eq!(published.len(), 2);
        assert_eq!(published[0]["uri"], "everything+test://static/resource/1");
        assert_eq!(published[1]["uri"], "memory+memory://graph");
        let templates = vec![
            vec![json!({"uriTemplate": "test://static/resource/{id}"})],
            vec![],
        ];
        let published = publish_resources(&prefixes, &templates, "uriTemplate");
        assert_eq!(
            published[0]["uriTemplate"],
            "everything+test://static/resource/{id}"
        );
    }

    #[test]
    fn links_and_embedded_resources_in_results_are_published() {
        let prefixes = UriPrefixes::new(&servers()).unwrap();
        let mut result = json!({"content": [
            {"type": "text", "text": "see test://x"},
            {"type": "resource_link", "uri": "test://static/resource/2", "name": "r2"},
            {"type": "resource", "resource": {"uri": "test://static/resource/3", "text": "t"}},
        ]});
        publish_result_uris(&prefixes, 0, &mut result);
        assert_eq!(result["content"][0]["text"], "see test://x");
        assert_eq!(
            result["content"][1]["uri"],
            "everything+test://static/resource/2"
        );
        assert_eq!(
            result["content"][2]["resource"]["uri"],
            "everything+test://static/resource/3"
        );
        let mut prompt = json!({"messages": [
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "memory://graph"}}},
        ]});
        publish_result_uris(&prefixes, 1, &mut prompt);
        assert_eq!(
            prompt["messages"][0]["content"]["resource"]["uri"],
            "memory+memory://graph"
        );
        let mut read = json!({"contents": [{"uri": "memory://graph", "text": "{}"}]});
        publish_result_uris(&prefixes, 1, &mut read);
        assert_eq!(read["contents"][0]["uri"], "memory+memory://graph");
    }
}
