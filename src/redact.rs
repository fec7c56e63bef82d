//! Secrets out of every result: one pass over the finished structure (every string, content
//! blocks and `structuredContent` alike), so nothing added along the way can carry a
//! credential past it. The report names the rules that fired, never the values.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

struct Rule {
    name: &'static str,
    pattern: Regex,
    /// Capture group kept in front of the redaction (a URL's scheme, a key's name).
    keep: Option<usize>,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |name, pattern: &str, keep| Rule {
        name,
        pattern: Regex::new(pattern).expect("a valid redaction pattern"),
        keep,
    };
    vec![
        rule(
            "private-key-block",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
            None,
        ),
        rule("aws-access-key-id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
        rule(
            "aws-secret-access-key",
            r"(?i)(aws_secret_access_key\s*[=:]\s*)[A-Za-z0-9/+=]{30,}",
            Some(1),
        ),
        rule("github-token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", None),
        rule(
            "github-fine-grained-token",
            r"\bgithub_pat_[A-Za-z0-9_]{30,}\b",
            None,
        ),
        rule("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}\b", None),
        rule("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b", None),
        rule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}\b", None),
        rule(
            "stripe-key",
            r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}\b",
            None,
        ),
        rule(
            "openai-or-anthropic-key",
            r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{32,}\b",
            None,
        ),
        rule(
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b",
            None,
        ),
        rule(
            "bearer-token",
            r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}",
            Some(1),
        ),
        rule(
            "url-credentials",
            r"(?i)([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@",
            Some(1),
        ),
        rule(
            "password-assignment",
            r#"(?i)(\b(?:password|passwd|secret|api_?key|token)\s*[=:]\s*["']?)[^\s"']{8,}"#,
            Some(1),
        ),
    ]
});

/// What a pass removed: how many values, by rule.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub by_rule: BTreeMap<&'static str, usize>,
}

impl Report {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "redacted": self.by_rule.values().sum::<usize>(),
            "rules": self.by_rule,
        })
    }
}

/// Redacts every string in `value`, in place.
pub fn redact(value: &mut Value, report: &mut Report) {
    match value {
        Value::String(text) => {
            if let Some(clean) = redact_text(text, report) {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, report)),
        Value::Object(map) => map.values_mut().for_each(|v| redact(v, report)),
        _ => {}
    }
}

fn redact_text(text: &str, report: &mut Report) -> Option<String> {
    let mut current: Option<String> = None;
    for rule in RULES.iter() {
        let source = current.as_deref().unwrap_or(text);
        if !rule.pattern.is_match(source) {
            continue;
        }
        let mut hits = 0;
        let replaced = rule
            .pattern
            .replace_all(source, |caps: &regex::Captures<'_>| {
                hits += 1;
                let kept = rule
                    .keep
                    .and_then(|i| caps.get(i))
                    .map_or("", |m| m.as_str());
                format!("{kept}[REDACTED:{}]", rule.name)
            })
            .into_owned();
        *report.by_rule.entry(rule.name).or_default() += hits;
        current = Some(replaced);
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_everywhere_in_the_structure_and_names_only_rules() {
        let key = "AKIA".to_owned() + "ABCDEFGHIJKLMNOP";
        let token = "ghp_".to_owned() + &"a".repeat(36);
        let mut value = json!({
            "content": [{"type": "text", "text": format!("key={key}\nurl=https://user:hunter22@example.com/x")}],
            "structuredContent": {"matches": [{"line": format!("token {token}")}], "excerpt": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"}
        });
        let mut report = Report::default();
        redact(&mut value, &mut report);
        let text = value.to_string();
        assert!(
            !text.contains(&key)
                && !text.contains(&token)
                && !text.contains("hunter22")
                && !text.contains("abcdefghijklmnop"),
            "{text}"
        );
        assert!(
            text.contains("https://[REDACTED:url-credentials]example.com"),
            "{text}"
        );
        assert_eq!(report.by_rule["aws-access-key-id"], 1);
        assert!(!report.to_json().to_string().contains("AKIA"));
    }

    #[test]
    fn private_key_blocks_go_whole() {
        let mut value = json!(
            "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----\nz"
        );
        redact(&mut value, &mut Report::default());
        assert_eq!(value, json!("a\n[REDACTED:private-key-block]\nz"));
    }
}
