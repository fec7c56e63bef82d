//! A policy file's text (`--policy FILE`, or a config file's `[policy]` table): its
//! `[[rules]]`, each a `RuleSpec`.

use serde::Deserialize;

use super::rule::RuleSpec;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    rules: Vec<RuleSpec>,
}

const SHAPE: &str = "write [[rules]] tables with name, phase (list or call), effect (allow, deny or require), when (a CEL condition) and an optional message";

/// The rules of a policy file written in TOML.
pub fn parse(text: &str) -> Result<Vec<RuleSpec>, String> {
    toml::from_str::<PolicyFile>(text)
        .map(|file| file.rules)
        .map_err(|e| format!("not a policy file: {e}; {SHAPE}"))
}

/// The rules of a config file's `policy` table (TOML `[[policy.rules]]`, or JSON
/// `"policy": {"rules": [...]}`), already read as a document.
pub fn parse_value(table: serde_json::Value) -> Result<Vec<RuleSpec>, String> {
    serde_json::from_value::<PolicyFile>(table)
        .map(|file| file.rules)
        .map_err(|e| {
            format!(
                "its policy: {e}; {}",
                SHAPE.replace("[[rules]]", "[[policy.rules]]")
            )
        })
}
