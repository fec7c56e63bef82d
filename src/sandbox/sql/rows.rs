//! A query's rows as JSON: each value from PostgreSQL's text form by its column's type.
//! Numbers JSON carries exactly stay numbers (int2, int4, float4, float8 when finite);
//! int8 and numeric become strings (a JSON reader would lose digits); booleans, JSON and
//! arrays of those are parsed; bytea becomes base64; timestamps ISO 8601; everything else
//! stays the server's text. Rows are added until `max_bytes` of JSON, then cut.

use base64::Engine;
use postgres::types::Type;
use serde_json::{Map, Value, json};

/// The columns (name and type) and rows as JSON, and whether rows were cut for size.
pub struct Table {
    pub columns: Value,
    pub rows: Vec<Value>,
    pub truncated: bool,
    pub bytes: usize,
}

pub fn table(
    columns: &[(String, Type)],
    rows: Vec<Vec<Option<String>>>,
    max_bytes: usize,
) -> Table {
    let described = columns
        .iter()
        .map(|(name, kind)| json!({"name": name, "type": kind.name()}))
        .collect();
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut truncated = false;
    for row in rows {
        let mut object = Map::new();
        for ((name, kind), text) in columns.iter().zip(row) {
            object.insert(name.clone(), text.map_or(Value::Null, |t| value(kind, &t)));
        }
        let row = Value::Object(object);
        let size = row.to_string().len() + 1;
        if bytes + size > max_bytes {
            truncated = true;
            break;
        }
        bytes += size;
        out.push(row);
    }
    Table {
        columns: Value::Array(described),
        rows: out,
        truncated,
        bytes,
    }
}

/// One value from its text form.
pub fn value(kind: &Type, text: &str) -> Value {
    match *kind {
        Type::INT2 | Type::INT4 | Type::OID => text
            .parse::<i64>()
            .map_or_else(|_| text.into(), Value::from),
        Type::FLOAT4 | Type::FLOAT8 => text
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map_or_else(|| text.into(), Value::from),
        Type::BOOL => Value::Bool(text == "t"),
        Type::JSON | Type::JSONB => serde_json::from_str(text).unwrap_or_else(|_| text.into()),
        Type::BYTEA => match text.strip_prefix("\\x").map(hex_bytes) {
            Some(Some(bytes)) => base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into(),
            _ => text.into(),
        },
        Type::TIMESTAMP | Type::TIMESTAMPTZ => iso_timestamp(text).into(),
        // int8, numeric, text, dates, uuids, arrays and the rest: the server's text.
        _ => text.into(),
    }
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `2026-12-02 06:00:00.5+00` (PostgreSQL's ISO style) as `2026-12-02T06:00:00.5+00:00`.
fn iso_timestamp(text: &str) -> String {
    let with_t = text.replacen(' ', "T", 1);
    // A zone given in hours only (`+00`, `-05`) gets its minutes.
    let bytes = with_t.as_bytes();
    let n = bytes.len();
    if n > 3
        && matches!(bytes[n - 3], b'+' | b'-')
        && bytes[n - 2].is_ascii_digit()
        && bytes[n - 1].is_ascii_digit()
        && with_t[..n - 3].contains('T')
    {
        return format!("{with_t}:00");
    }
    with_t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_precision_and_take_json_forms() {
        assert_eq!(value(&Type::INT4, "42"), json!(42));
        assert_eq!(
            value(&Type::INT8, "9007199254740993"),
            json!("9007199254740993")
        );
        assert_eq!(
            value(&Type::NUMERIC, "0.1000000000000000055511"),
            json!("0.1000000000000000055511")
        );
        assert_eq!(value(&Type::FLOAT8, "1.5"), json!(1.5));
        assert_eq!(value(&Type::FLOAT8, "NaN"), json!("NaN"));
        assert_eq!(value(&Type::BOOL, "t"), json!(true));
        assert_eq!(value(&Type::BOOL, "f"), json!(false));
        assert_eq!(value(&Type::JSONB, "{\"a\": [1]}"), json!({"a": [1]}));
        assert_eq!(value(&Type::BYTEA, "\\x00ff10"), json!("AP8Q"));
        assert_eq!(
            value(&Type::TIMESTAMPTZ, "2026-12-02 06:00:00.5+00"),
            json!("2026-12-02T06:00:00.5+00:00")
        );
        assert_eq!(
            value(&Type::TIMESTAMPTZ, "2026-12-02 06:00:00+05:30"),
            json!("2026-12-02T06:00:00+05:30")
        );
        assert_eq!(
            value(&Type::TIMESTAMP, "2026-12-02 06:00:00"),
            json!("2026-12-02T06:00:00")
        );
        assert_eq!(value(&Type::TEXT, "hello"), json!("hello"));
    }

    #[test]
    fn rows_stop_at_the_byte_cap_and_say_so() {
        let columns = vec![("n".to_owned(), Type::INT4), ("s".to_owned(), Type::TEXT)];
        let rows: Vec<Vec<Option<String>>> =
            (0..100).map(|i| vec![Some(i.to_string()), None]).collect();
        let all = table(&columns, rows.clone(), 1 << 20);
        assert_eq!(all.rows.len(), 100);
        assert!(!all.truncated);
        assert_eq!(all.rows[3], json!({"n": 3, "s": null}));
        assert_eq!(all.columns[1], json!({"name": "s", "type": "text"}));
        let cut = table(&columns, rows, 100);
        assert!(cut.truncated);
        assert!(cut.bytes <= 100 && !cut.rows.is_empty() && cut.rows.len() < 100);
    }
}
