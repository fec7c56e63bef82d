//! `x-mcp-header` (§4.7.4): which tool arguments a client mirrors into `Mcp-Param-*`
//! headers, the checks that make a tool definition unusable, and the header values for
//! one call.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::headers::{PARAM_PREFIX, decode_value, encode_value};

/// Pages of `tools/list` read at most when learning a server's annotations: a server that
/// pages forever is not followed.
pub const MAX_LIST_PAGES: usize = 64;

/// The JSON type an annotated property has; only these three may carry the annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Boolean,
}

/// One annotated property: `Mcp-Param-{header}` mirrors `arguments` at `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    pub header: String,
    pub path: Vec<String>,
    pub kind: ParamType,
}

/// Keywords whose value is one subschema, a list of them, or a map of them. Values under
/// any other keyword (`default`, `enum`, `examples`, …) are data, not schemas.
const ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
const LIST: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
const MAP: &[&str] = &[
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];

/// The annotated properties of a tool's `inputSchema`, or why the tool must not be offered.
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    walk(input_schema, &mut Vec::new(), true, &mut found)?;
    let mut seen = HashSet::new();
    for param in &found {
        if !seen.insert(param.header.to_ascii_lowercase()) {
            return Err(format!(
                "x-mcp-header {:?} is used twice (names are compared case-insensitively)",
                param.header
            ));
        }
    }
    Ok(found)
}

fn walk(
    schema: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    if let Some(annotation) = schema.get("x-mcp-header") {
        if !reachable || path.is_empty() {
            return Err(
                "x-mcp-header may only annotate a property reached from the root through \"properties\" alone"
                    .into(),
            );
        }
        found.push(ParamHeader {
            header: header_name(annotation)?,
            path: path.clone(),
            kind: param_type(schema)?,
        });
    }
    for (keyword, value) in schema {
        match keyword.as_str() {
            "properties" => {
                if let Value::Object(properties) = value {
                    for (name, sub) in properties {
                        path.push(name.clone());
                        let walked = walk(sub, path, reachable, found);
                        path.pop();
                        walked?;
                    }
                }
            }
            k if ONE.contains(&k) => walk(value, path, false, found)?,
            k if LIST.contains(&k) => {
                for sub in value.as_array().into_iter().flatten() {
                    walk(sub, path, false, found)?;
                }
            }
            k if MAP.contains(&k) => {
                for sub in value.as_object().into_iter().flat_map(Map::values) {
                    walk(sub, path, false, found)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn header_name(annotation: &Value) -> Result<String, String> {
    let Value::String(name) = annotation else {
        return Err("x-mcp-header must be a string".into());
    };
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() {
        return Err("x-mcp-header must not be empty".into());
    }
    if !name.chars().all(tchar) {
        return Err(format!(
            "x-mcp-header {name:?} may contain only HTTP token characters"
        ));
    }
    Ok(name.clone())
}

fn param_type(schema: &Map<String, Value>) -> Result<ParamType, String> {
    let named = |t: &str| match t {
        "string" => Some(ParamType::String),
        "integer" => Some(ParamType::Integer),
        "boolean" => Some(ParamType::Boolean),
        _ => None,
    };
    let kind = match schema.get("type") {
        Some(Value::String(t)) => named(t),
        // ["string", "null"]: one primitive type, nullable.
        Some(Value::Array(types)) => {
            let kinds: Vec<_> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match kinds.as_slice() {
                [one] if kinds.len() + 1 >= types.len() => named(one),
                _ => None,
            }
        }
        _ => None,
    };
    kind.ok_or_else(|| {
        "x-mcp-header may only annotate a property of type string, integer or boolean".into()
    })
}

/// The `Mcp-Param-*` headers of one call: (lower-case name, encoded value). A value that is
/// absent or null gets no header.
pub fn values(params: &[ParamHeader], arguments: Option<&Value>) -> Vec<(String, String)> {
    params
        .iter()
        .filter_map(|param| {
            let value = match argument(param, arguments)? {
                Value::String(s) => encode_value(s),
                other => plain(other)?,
            };
            Some((param_header_name(param), value))
        })
        .collect()
}

/// Checks a call's `Mcp-Param-*` headers (looked up by `header`) against its arguments, as
/// a server must (SEP-2243): a mirrored argument needs its header, the header decoded must
/// equal the argument, and a header for an absent argument, or one whose `=?base64?…?=`
/// payload does not decode, is refused. The error says which header and why.
pub fn check_values(
    params: &[ParamHeader],
    arguments: Option<&Value>,
    header: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    for param in params {
        let name = param_header_name(param);
        let shown = format!("Mcp-Param-{}", param.header);
        let path = param.path.join(".");
        let expected = argument(param, arguments).and_then(plain_or_string);
        match (expected, header(&name)) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(format!(
                    "{shown} was sent but arguments.{path} is absent or null"
                ));
            }
            (Some(value), None) => {
                return Err(format!(
                    "{shown} is missing: the tool mirrors arguments.{path} ({value:?}) into it"
                ));
            }
            (Some(value), Some(sent)) => {
                let decoded = decode_value(&sent).ok_or_else(|| {
                    format!("{shown} is not valid: its =?base64?…?= payload is not base64 of UTF-8")
                })?;
                if decoded != value {
                    return Err(format!(
                        "{shown} says {decoded:?} but arguments.{path} is {value:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn param_header_name(param: &ParamHeader) -> String {
    format!("{PARAM_PREFIX}{}", param.header.to_ascii_lowercase())
}

/// The argument a parameter mirrors; `None` when absent or null.
fn argument<'a>(param: &ParamHeader, arguments: Option<&'a Value>) -> Option<&'a Value> {
    let mut at = arguments;
    for step in &param.path {
        at = at.and_then(|v| v.get(step));
    }
    at.filter(|v| !v.is_null())
}

/// A scalar argument as header text before any encoding.
fn plain_or_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        other => plain(other),
    }
}

/// A boolean or number as header text: 42.0 is the integer 42 (the server compares
/// numerically).
fn plain(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                format!("{}", f as i64)
            }
            _ => n.to_string(),
        }),
        _ => None,
    }
}

/// Removes from a `tools/list` result every tool whose annotations break the rules, and
/// returns the usable tools' headers by name, plus (name, reason) for each dropped tool.
pub type Listed = (Vec<(String, Vec<ParamHeader>)>, Vec<(String, String)>);

pub fn filter_list(result: &mut Value) -> Listed {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    if let Some(Value::Array(tools)) = result.get_mut("tools") {
        tools.retain(|tool| {
            let name = tool
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
            match param_headers(schema) {
                Ok(params) => {
                    kept.push((name, params));
                    true
                }
                Err(reason) => {
                    dropped.push((name, reason));
                    false
                }
            }
        });
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers_of(schema: Value) -> Result<Vec<ParamHeader>, String> {
        param_headers(&schema)
    }

    #[test]
    fn finds_top_level_and_nested_annotations() {
        let params = headers_of(json!({"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "opts":{"type":"object","properties":{"level":{"type":"integer","x-mcp-header":"Level"}}},
            "query":{"type":"string"}}}))
        .unwrap();
        assert_eq!(params.len(), 2);
        assert_eq!(params[1].path, vec!["opts".to_owned(), "level".to_owned()]);
        assert_eq!(params[1].kind, ParamType::Integer);
    }

    #[test]
    fn refuses_every_invalid_annotation_of_the_conformance_suite() {
        let bad = [
            json!({"properties":{"v":{"type":"string","x-mcp-header":""}}}),
            json!({"properties":{"v":{"type":"object","x-mcp-header":"Data"}}}),
            json!({"properties":{"v":{"type":"array","items":{"type":"string"},"x-mcp-header":"Items"}}}),
            json!({"properties":{"v":{"type":"null","x-mcp-header":"Nil"}}}),
            json!({"properties":{"v":{"type":"number","x-mcp-header":"Score"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"Region"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"My Region"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"Region:Primary"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"Région"}}}),
            json!({"properties":{"v":{"type":"string","x-mcp-header":"Region\t1"}}}),
            json!({"properties":{"v":{"type":"array","items":{"type":"string","x-mcp-header":"I"}}}}),
            json!({"properties":{"v":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}}),
            json!({"$defs":{"d":{"type":"string","x-mcp-header":"D"}}}),
        ];
        for schema in bad {
            assert!(headers_of(schema.clone()).is_err(), "{schema}");
        }
    }

    #[test]
    fn a_property_named_like_the_keyword_is_just_a_property() {
        let params = headers_of(json!({"properties":{"x-mcp-header":{"type":"string"}},
            "default":{"x-mcp-header":"NotASchema"}}))
        .unwrap();
        assert!(params.is_empty());
    }

    #[test]
    fn encodes_each_kind_and_omits_null() {
        let params = headers_of(json!({"properties":{
            "r":{"type":"string","x-mcp-header":"Region"},
            "p":{"type":"integer","x-mcp-header":"Priority"},
            "v":{"type":["boolean","null"],"x-mcp-header":"Verbose"},
            "n":{"type":"string","x-mcp-header":"NonAscii"}}}))
        .unwrap();
        let values = values(
            &params,
            Some(&json!({"r":"us-west1","p":42.0,"v":null,"n":"日本"})),
        );
        assert_eq!(
            values,
            vec![
                ("mcp-param-region".to_owned(), "us-west1".to_owned()),
                ("mcp-param-priority".to_owned(), "42".to_owned()),
                (
                    "mcp-param-nonascii".to_owned(),
                    "=?base64?5pel5pys?=".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn filtering_keeps_valid_tools_and_names_the_dropped_ones() {
        let mut result = json!({"tools":[
            {"name":"good","inputSchema":{"properties":{"r":{"type":"string","x-mcp-header":"Region"}}}},
            {"name":"bad","inputSchema":{"properties":{"r":{"type":"number","x-mcp-header":"Score"}}}}]});
        let (kept, dropped) = filter_list(&mut result);
        assert_eq!(kept.len(), 1);
        assert_eq!(dropped[0].0, "bad");
        assert_eq!(result["tools"].as_array().unwrap().len(), 1);
    }
}

#[cfg(test)]
mod server_checks {
    use super::*;
    use serde_json::json;

    fn region() -> Vec<ParamHeader> {
        param_headers(&json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"}}}))
        .unwrap()
    }

    fn check(arguments: Value, headers: &[(&str, &str)]) -> Result<(), String> {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        check_values(&region(), Some(&arguments), |name| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn matching_headers_pass_in_plain_and_base64_forms() {
        assert_eq!(
            check(
                json!({"region": "Hello", "n": 4.0}),
                &[
                    ("Mcp-Param-Region", "=?base64?SGVsbG8=?="),
                    ("Mcp-Param-N", "4")
                ]
            ),
            Ok(())
        );
        // Without the full sentinel the value is literal.
        assert_eq!(
            check(
                json!({"region": "=?base64?SGVsbG8="}),
                &[("Mcp-Param-Region", "=?base64?SGVsbG8=")]
            ),
            Ok(())
        );
        assert_eq!(check(json!({}), &[]), Ok(()));
    }

    #[test]
    fn missing_mismatched_stray_and_undecodable_headers_are_refused() {
        let missing = check(json!({"region": "eu"}), &[]).unwrap_err();
        assert!(missing.contains("Mcp-Param-Region is missing"), "{missing}");
        let mismatch = check(json!({"region": "eu"}), &[("Mcp-Param-Region", "us")]).unwrap_err();
        assert!(mismatch.contains("says \"us\""), "{mismatch}");
        assert!(check(json!({}), &[("Mcp-Param-Region", "us")]).is_err());
        assert!(
            check(
                json!({"region": "Hello"}),
                &[("Mcp-Param-Region", "=?base64?SGVsbG8?=")]
            )
            .is_err()
        );
        assert!(
            check(
                json!({"region": "Hello"}),
                &[("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=")]
            )
            .is_err()
        );
        assert!(check(json!({"n": 5}), &[("Mcp-Param-N", "6")]).is_err());
    }
}
