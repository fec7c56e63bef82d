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

/// What a client can be asked, as far as a server's lists may depend on it: servers list
/// some tools only to clients that can answer their questions (server-everything's
/// sampling, elicitation and roots tools). Each distinct profile gets lists of its own, read
/// by a session that declares exactly it; there are at most 32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AskProfile(u8);

impl AskProfile {
    const FORM: u8 = 1;
    const URL: u8 = 2;
    const SAMPLING: u8 = 4;
    const SAMPLING_TOOLS: u8 = 8;
    const ROOTS: u8 = 16;

    /// The profile of a client's declared `capabilities`.
    pub fn of(capabilities: &Value) -> AskProfile {
        let mut bits = 0;
        if let Some(elicitation) = capabilities.get("elicitation") {
            // `elicitation: {}` is form mode (the 2025-06-18 shape).
            let url = elicitation.get("url").is_some();
            if elicitation.get("form").is_some() || !url {
                bits |= Self::FORM;
            }
            if url {
                bits |= Self::URL;
            }
        }
        if let Some(sampling) = capabilities.get("sampling") {
            bits |= Self::SAMPLING;
            if sampling.get("tools").is_some() {
                bits |= Self::SAMPLING_TOOLS;
            }
        }
        if capabilities.get("roots").is_some() {
            bits |= Self::ROOTS;
        }
        AskProfile(bits)
    }

    /// The capabilities a session of this profile declares.
    pub fn capabilities(self) -> Value {
        let has = |bit: u8| self.0 & bit != 0;
        let mut declared = Map::new();
        if has(Self::FORM) || has(Self::URL) {
            let mut modes = Map::new();
            if has(Self::FORM) {
                modes.insert("form".into(), json!({}));
            }
            if has(Self::URL) {
                modes.insert("url".into(), json!({}));
            }
            declared.insert("elicitation".into(), Value::Object(modes));
        }
        if has(Self::SAMPLING) {
            let tools = if has(Self::SAMPLING_TOOLS) {
                json!({"tools": {}})
            } else {
                json!({})
            };
            declared.insert("sampling".into(), tools);
        }
        if has(Self::ROOTS) {
            declared.insert("roots".into(), json!({}));
        }
        Value::Object(declared)
    }
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
    fn clients_that_can_be_asked_the_same_share_a_profile() {
        let form = AskProfile::of(&json!({"elicitation": {}}));
        assert_eq!(
            form,
            AskProfile::of(&json!({"elicitation": {"form": {}}, "experimental": {}}))
        );
        assert_ne!(
            form,
            AskProfile::of(&json!({"elicitation": {"form": {}, "url": {}}}))
        );
        assert_ne!(form, AskProfile::of(&json!({})));
        let all =
            json!({"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}});
        let profile = AskProfile::of(&all);
        assert_eq!(profile.capabilities(), all);
        assert_eq!(AskProfile::of(&profile.capabilities()), profile);
        assert_eq!(AskProfile::of(&json!({})).capabilities(), json!({}));
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
