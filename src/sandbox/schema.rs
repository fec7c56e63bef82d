//! A JSON Schema subset validator for tool arguments: the keywords the published schemas
//! use, and nothing else. A schema with any other keyword is refused when a tool is
//! registered, so no constraint can be published and silently not enforced.

use serde_json::Value;

use super::guard::Invalid;

const KNOWN: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "description",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "enum",
    "items",
    "title",
    "maxItems",
];

/// Refuses a schema that uses a keyword this validator does not implement.
pub fn check_supported(schema: &Value, at: &str) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err(format!("{at}: a schema must be an object"));
    };
    for (key, value) in map {
        if !KNOWN.contains(&key.as_str()) {
            return Err(format!(
                "{at}: the keyword '{key}' is not implemented by the validator"
            ));
        }
        match key.as_str() {
            "properties" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    check_supported(sub, &format!("{at}.{name}"))?;
                }
            }
            "items" => check_supported(value, &format!("{at}[]"))?,
            "additionalProperties" if value != &Value::Bool(false) => {
                return Err(format!(
                    "{at}: only additionalProperties: false is implemented"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Validates `value` against `schema`; the error names the offending field.
pub fn validate(schema: &Value, value: &Value, at: &str) -> Result<(), Invalid> {
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        let ok = match kind {
            "object" => value.is_object(),
            "string" => value.is_string(),
            "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            _ => false,
        };
        if !ok {
            return Err(invalid(
                at.to_owned(),
                format!("{at} must be of type {kind}"),
            ));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        return Err(invalid(
            at.to_owned(),
            format!("{at} must be one of {}", Value::Array(allowed.clone())),
        ));
    }
    check_bounds(schema, value, at)?;
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && array.len() as u64 > max
        {
            return Err(invalid(
                at.to_owned(),
                format!("{at} may have at most {max} items"),
            ));
        }
        for (i, item) in array.iter().enumerate() {
            validate(items, item, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(object) = value.as_object() {
        check_object(schema, object, at)?;
    }
    Ok(())
}

/// `minimum` and `maximum` of a number, `minLength` and `maxLength` of a string.
fn check_bounds(schema: &Value, value: &Value, at: &str) -> Result<(), Invalid> {
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(invalid(
                at.to_owned(),
                format!("{at} must be at least {min}"),
            ));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(invalid(
                at.to_owned(),
                format!("{at} must be at most {max}"),
            ));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            return Err(invalid(
                at.to_owned(),
                format!("{at} must be at least {min} characters"),
            ));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            return Err(invalid(
                at.to_owned(),
                format!("{at} must be at most {max} characters"),
            ));
        }
    }
    Ok(())
}

/// `required`, and each property against its own schema (`additionalProperties: false`
/// refusing the unknown).
fn check_object(
    schema: &Value,
    object: &serde_json::Map<String, Value>,
    at: &str,
) -> Result<(), Invalid> {
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(name) {
            return Err(invalid(
                format!("{at}.{name}"),
                format!("{at}.{name} is required"),
            ));
        }
    }
    for (name, item) in object {
        match properties.and_then(|p| p.get(name)) {
            Some(sub) => validate(sub, item, &format!("{at}.{name}"))?,
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return Err(invalid(
                    format!("{at}.{name}"),
                    format!("{at}.{name} is not a known argument"),
                ));
            }
            None => {}
        }
    }
    Ok(())
}

fn invalid(field: String, message: String) -> Invalid {
    Invalid { field, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refuses_unknown_keywords_at_registration() {
        assert!(
            check_supported(
                &json!({"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}),
                "s"
            )
            .is_err()
        );
        assert!(check_supported(&json!({"type":"object","additionalProperties":{}}), "s").is_err());
        assert!(check_supported(&json!({"type":"object","properties":{"a":{"type":"integer","minimum":1}},"additionalProperties":false}), "s").is_ok());
    }

    #[test]
    fn names_the_offending_field() {
        let schema = json!({"type":"object","properties":{"path":{"type":"string","maxLength":3},"n":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false});
        assert_eq!(validate(&schema, &json!({"path":"a"}), "arguments"), Ok(()));
        assert_eq!(
            validate(&schema, &json!({}), "arguments")
                .unwrap_err()
                .message,
            "arguments.path is required"
        );
        assert_eq!(
            validate(&schema, &json!({"path":"a","x":1}), "arguments")
                .unwrap_err()
                .message,
            "arguments.x is not a known argument"
        );
        assert_eq!(
            validate(&schema, &json!({"path":"a","x":1}), "arguments")
                .unwrap_err()
                .field,
            "arguments.x"
        );
        assert_eq!(
            validate(&schema, &json!({"path":"abcd"}), "arguments")
                .unwrap_err()
                .message,
            "arguments.path must be at most 3 characters"
        );
        assert_eq!(
            validate(&schema, &json!({"path":"a","n":0}), "arguments")
                .unwrap_err()
                .message,
            "arguments.n must be at least 1"
        );
        assert_eq!(
            validate(&schema, &json!({"path":1}), "arguments")
                .unwrap_err()
                .message,
            "arguments.path must be of type string"
        );
    }
}
