//! The structural guard every tool call passes before its schema is checked and before any
//! tool runs (seed 002's "structural sanitizer"): arguments nested at most
//! `--max-argument-depth` deep with at most `--max-argument-items` entries in all, and no
//! control, bidirectional-override or lone-surrogate code point in any key or string.
//! Each refusal names the field, so the caller can fix exactly that.

use serde_json::Value;

/// The guard's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Deepest nesting: the arguments object itself is depth 1.
    pub max_depth: usize,
    /// Most entries (object members and array elements, at every level) in all.
    pub max_items: usize,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            max_depth: 8,
            max_items: 1000,
        }
    }
}

/// Why a value was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The field's path, e.g. `arguments.filters[2].name`.
    pub field: String,
    pub message: String,
}

/// What stands in for a lone surrogate once `parse_params` has let the JSON parse: a NUL,
/// which the guard refuses anyway, followed by a marker, so the refusal can say what it was.
const LONE_SURROGATE: &str = "\u{0}lone surrogate\u{0}";

/// The request's params as a value. JSON may escape a lone UTF-16 surrogate (`"\ud800"`),
/// which no Rust string can hold; such a params is parsed with a marker in its place, so
/// the guard refuses it naming the field rather than the whole request failing vaguely.
pub fn parse_params(raw: &str) -> Result<Value, String> {
    match serde_json::from_str(raw) {
        Ok(value) => Ok(value),
        Err(first) => serde_json::from_str(&mark_lone_surrogates(raw))
            .map_err(|_| format!("params are not valid JSON ({first})")),
    }
}

/// Checks `value` (found at `at`) for its shape and its text.
pub fn check(value: &Value, at: &str, shape: Shape) -> Result<(), Invalid> {
    let mut items = 0;
    walk(value, at, 1, shape, &mut items)
}

/// Checks only the text of `value` (keys and strings), at any depth.
pub fn check_text(value: &Value, at: &str) -> Result<(), Invalid> {
    let unbounded = Shape {
        max_depth: usize::MAX,
        max_items: usize::MAX,
    };
    check(value, at, unbounded)
}

fn walk(
    value: &Value,
    at: &str,
    depth: usize,
    shape: Shape,
    items: &mut usize,
) -> Result<(), Invalid> {
    let container = matches!(value, Value::Array(_) | Value::Object(_));
    if container && depth > shape.max_depth {
        return Err(Invalid {
            field: at.to_owned(),
            message: format!(
                "{at} is nested {depth} levels deep; at most {} are allowed (--max-argument-depth): flatten the arguments",
                shape.max_depth
            ),
        });
    }
    match value {
        Value::String(text) => text_ok(text, at, false),
        Value::Array(elements) => {
            for (i, element) in elements.iter().enumerate() {
                let here = format!("{at}[{i}]");
                count(items, &here, shape)?;
                walk(element, &here, depth + 1, shape, items)?;
            }
            Ok(())
        }
        Value::Object(members) => {
            for (key, member) in members {
                let here = format!("{at}.{}", key.escape_debug());
                count(items, &here, shape)?;
                text_ok(key, &here, true)?;
                walk(member, &here, depth + 1, shape, items)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Counts one more entry, refusing the one past `--max-argument-items`.
fn count(items: &mut usize, at: &str, shape: Shape) -> Result<(), Invalid> {
    *items += 1;
    if *items > shape.max_items {
        return Err(Invalid {
            field: at.to_owned(),
            message: format!(
                "the arguments hold more than {} entries (--max-argument-items), the last at {at}: send fewer",
                shape.max_items
            ),
        });
    }
    Ok(())
}

/// A key or string with no code point that hides or reorders what a reader sees. Strings
/// may hold tabs and line breaks (a query spans lines); keys may not.
fn text_ok(text: &str, at: &str, key: bool) -> Result<(), Invalid> {
    let what = if key { "the key" } else { "the string" };
    if text.contains(LONE_SURROGATE) {
        return Err(Invalid {
            field: at.to_owned(),
            message: format!(
                "{what} at {at} holds a lone surrogate (half of a UTF-16 pair, \\uD800-\\uDFFF, without the other half): send valid Unicode"
            ),
        });
    }
    for (position, c) in text.chars().enumerate() {
        let refused = match c {
            '\t' | '\n' | '\r' if !key => None,
            c if c.is_control() => Some("a control character"),
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {
                Some("a bidirectional override or isolate")
            }
            _ => None,
        };
        if let Some(kind) = refused {
            return Err(Invalid {
                field: at.to_owned(),
                message: format!(
                    "{what} at {at} holds {kind} (U+{:04X}) at character {position}: remove it",
                    c as u32
                ),
            });
        }
    }
    Ok(())
}

/// `raw` with every `\uD800`-`\uDFFF` escape that is not half of a pair replaced by the
/// marker (JSON-escaped). Escapes occur only inside strings, so a plain scan suffices.
fn mark_lone_surrogates(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        let hex = raw.get(at + 2..at + 6)?;
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u'))
            .then(|| u16::from_str_radix(hex, 16).ok())
            .flatten()
    };
    let marker = "\\u0000lone surrogate\\u0000";
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            match unit(i) {
                Some(0xD800..=0xDBFF) if matches!(unit(i + 6), Some(0xDC00..=0xDFFF)) => {
                    out.push_str(&raw[i..i + 12]);
                    i += 12;
                }
                Some(0xD800..=0xDFFF) => {
                    out.push_str(marker);
                    i += 6;
                }
                _ => {
                    // Any other escape (including `\\`) is copied whole, so its second
                    // character is never read as the start of one.
                    let end = (i + 2).min(bytes.len());
                    out.push_str(&raw[i..end]);
                    i = end;
                }
            }
        } else {
            let len = raw[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&raw[i..i + len]);
            i += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(value: &Value) -> Invalid {
        check(value, "arguments", Shape::default()).unwrap_err()
    }

    #[test]
    fn ordinary_arguments_pass() {
        let fine = json!({"query": "SELECT a\n\tFROM t -- é, 漢字, emoji 🦀, عربى", "max_rows": 5, "list": [1, 2, {"k": [true]}]});
        assert_eq!(check(&fine, "arguments", Shape::default()), Ok(()));
    }

    #[test]
    fn depth_is_bounded_and_the_deepest_field_named() {
        let mut value = json!(1);
        for _ in 0..8 {
            value = json!({ "a": value });
        }
        assert_eq!(
            check(&value, "arguments", Shape::default()),
            Ok(()),
            "8 deep"
        );
        let deeper = json!({ "a": value });
        let invalid = refused(&deeper);
        assert_eq!(invalid.field, "arguments.a.a.a.a.a.a.a.a");
        assert!(
            invalid.message.contains("--max-argument-depth"),
            "{invalid:?}"
        );
        let arrays = json!({"x": [[[[[[[[1]]]]]]]]});
        assert_eq!(refused(&arrays).field, "arguments.x[0][0][0][0][0][0][0]");
        let tight = Shape {
            max_depth: 2,
            ..Shape::default()
        };
        assert!(check(&json!({"a": {"b": 1}}), "arguments", tight).is_ok());
        assert!(check(&json!({"a": {"b": []}}), "arguments", tight).is_err());
    }

    #[test]
    fn items_are_bounded_in_all() {
        let at_bound = json!({ "list": vec![0; 999] });
        assert_eq!(check(&at_bound, "arguments", Shape::default()), Ok(()));
        let over = json!({ "list": vec![0; 1000] });
        let invalid = refused(&over);
        assert_eq!(invalid.field, "arguments.list[999]");
        assert!(invalid.message.contains("--max-argument-items"));
        // Spread over many small containers, the count is the same.
        let spread = json!({ "a": vec![vec![0; 9]; 100] });
        assert!(check(&spread, "arguments", Shape::default()).is_err());
    }

    #[test]
    fn hidden_code_points_are_refused_in_keys_and_strings() {
        for (text, kind) in [
            ("SELECT 1\u{0}", "control"),
            ("\u{1b}[31mred", "control"),
            ("a\u{7f}", "control"),
            ("a\u{85}b", "control"),
            ("admin\u{202E}txt.exe", "bidirectional"),
            ("x\u{2066}y\u{2069}", "bidirectional"),
            ("\u{202A}", "bidirectional"),
        ] {
            let invalid = refused(&json!({ "path": text }));
            assert_eq!(invalid.field, "arguments.path");
            assert!(invalid.message.contains(kind), "{text:?}: {invalid:?}");
            let key = refused(&json!({ "opts": { text: 1 } }));
            assert!(key.message.starts_with("the key"), "{key:?}");
            assert!(
                !key.field.contains(|c: char| c.is_control()),
                "the field name is escaped: {key:?}"
            );
        }
        // A tab is fine in a string and not in a key.
        assert!(check(&json!({"q": "a\tb"}), "arguments", Shape::default()).is_ok());
        assert!(check(&json!({"q\t": 1}), "arguments", Shape::default()).is_err());
        assert!(check_text(&json!("read_file\u{202E}"), "name").is_err());
    }

    #[test]
    fn lone_surrogates_are_named_not_lost() {
        for raw in [
            r#"{"arguments":{"path":"\ud800"}}"#,
            r#"{"arguments":{"path":"a\udc00b"}}"#,
            r#"{"arguments":{"path":"\ud800\ud800"}}"#,
            r#"{"arguments":{"path":"\uDBFFx"}}"#,
        ] {
            let params = parse_params(raw).unwrap();
            let invalid = check(&params["arguments"], "arguments", Shape::default()).unwrap_err();
            assert_eq!(invalid.field, "arguments.path", "{raw}");
            assert!(
                invalid.message.contains("lone surrogate"),
                "{raw}: {invalid:?}"
            );
        }
        // A proper pair, and an escaped backslash before a `u`, are left alone.
        let pair = parse_params(r#"{"p":"\ud83e\udd80","q":"\\ud800"}"#).unwrap();
        assert_eq!(pair["p"], "🦀");
        assert_eq!(pair["q"], "\\ud800");
        assert!(check_text(&pair, "params").is_ok());
        assert!(
            parse_params("{not json")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}
