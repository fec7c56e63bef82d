//! The aggregate endpoint's own handshake: what it can do is the union of what its
//! backends can do, and each backend's instructions reach the model under its server's
//! name (a model reading one block of text cannot tell whose advice it is otherwise).

use serde_json::{Map, Value, json};

/// The capabilities to declare for backends declaring `each`: a feature any backend has,
/// with `listChanged` and `subscribe` where any backend offers them (the gateway passes
/// their notifications on).
pub fn merged_capabilities(each: &[&Value]) -> Value {
    let mut merged = Map::new();
    for feature in ["tools", "prompts", "resources"] {
        let offered: Vec<&Value> = each.iter().filter_map(|c| c.get(feature)).collect();
        if offered.is_empty() {
            continue;
        }
        let any = |flag: &str| {
            offered
                .iter()
                .any(|f| f.get(flag) == Some(&Value::Bool(true)))
        };
        let mut declared = Map::new();
        if any("listChanged") {
            declared.insert("listChanged".into(), Value::Bool(true));
        }
        if feature == "resources" && any("subscribe") {
            declared.insert("subscribe".into(), Value::Bool(true));
        }
        merged.insert(feature.into(), Value::Object(declared));
    }
    for feature in ["logging", "completions"] {
        if each.iter().any(|c| c.get(feature).is_some()) {
            merged.insert(feature.into(), json!({}));
        }
    }
    Value::Object(merged)
}

/// Every backend's instructions, each under a heading naming its server and saying how
/// its tools are named; `None` when no backend gave any.
pub fn merged_instructions(
    servers: &[String],
    instructions: &[Option<&str>],
    separator: &str,
) -> Option<String> {
    let blocks: Vec<String> = servers
        .iter()
        .zip(instructions)
        .filter_map(|(server, text)| {
            let text = (*text)?.trim();
            (!text.is_empty()).then(|| {
                format!("## {server} (its tools and prompts are named {server}{separator}NAME)\n\n{text}")
            })
        })
        .collect();
    (!blocks.is_empty()).then(|| blocks.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_the_union() {
        let a = json!({"tools": {"listChanged": true}, "logging": {}});
        let b = json!({"tools": {}, "resources": {"subscribe": true}, "prompts": {"listChanged": false}});
        let c = json!({"completions": {}, "experimental": {"x": {}}});
        assert_eq!(
            merged_capabilities(&[&a, &b, &c]),
            json!({
                "tools": {"listChanged": true},
                "prompts": {},
                "resources": {"subscribe": true},
                "logging": {},
                "completions": {}
            })
        );
        assert_eq!(merged_capabilities(&[]), json!({}));
    }

    #[test]
    fn instructions_are_kept_apart_by_server() {
        let servers = vec!["everything".to_string(), "memory".into(), "quiet".into()];
        let text = merged_instructions(
            &servers,
            &[Some("Use echo to test."), Some("  "), None],
            "__",
        )
        .unwrap();
        assert_eq!(
            text,
            "## everything (its tools and prompts are named everything__NAME)\n\nUse echo to test."
        );
        assert_eq!(
            merged_instructions(&servers, &[None, None, None], "__"),
            None
        );
    }
}
