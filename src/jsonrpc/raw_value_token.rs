//! Finds serde_json's private `RawValue` key in JSON text: a `serde_json::Value` read of an
//! object whose first key is `$serde_json::private::RawValue` is not that object but the
//! JSON inside the key's string value, so what the gateway judges would differ from the
//! bytes it forwards. Text that names the key is refused where that difference matters.

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The key serde_json reads as "the raw JSON is in my value" (its `raw_value` feature).
const TOKEN: &str = "$serde_json::private::RawValue";

/// Whether any object key in `text`, after unescaping, is serde_json's `RawValue` key.
/// Text that is not JSON answers false: the caller's own parse reports that.
pub fn names_raw_value_token(text: &str) -> bool {
    // The key can only be spelled with its letters or with `\u` escapes: most text has
    // neither and is not parsed again.
    if !text.contains("RawValue") && !text.contains("\\u") {
        return false;
    }
    let mut reader = serde_json::Deserializer::from_str(text);
    matches!(Scan.deserialize(&mut reader), Ok(true))
}

/// Walks a JSON value, answering whether some object key is the token.
#[derive(Clone, Copy)]
struct Scan;

impl<'de> DeserializeSeed<'de> for Scan {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<bool, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            found |= key == TOKEN;
            found |= map.next_value_seed(Scan)?;
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(inner) = seq.next_element_seed(Scan)? {
            found |= inner;
        }
        Ok(found)
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_found_spelled_or_escaped_at_any_depth() {
        let plain = r#"{"arguments":{"$serde_json::private::RawValue":"{\"path\":\"/safe\"}"}}"#;
        assert!(names_raw_value_token(plain));
        let escaped = r#"{"a":[1,{"\u0024serde_json::private::Raw\u0056alue":"1"}]}"#;
        assert!(names_raw_value_token(escaped));
        let later = r#"{"_meta":{"x":1,"$serde_json::private::RawValue":{}}}"#;
        assert!(names_raw_value_token(later));
    }

    #[test]
    fn ordinary_json_and_the_word_in_a_value_are_not_the_key() {
        assert!(!names_raw_value_token(
            r#"{"name":"echo","arguments":{"text":"hi"}}"#
        ));
        assert!(!names_raw_value_token(
            r#"{"text":"$serde_json::private::RawValue"}"#
        ));
        assert!(!names_raw_value_token(r#"{"text":"caf\u00e9"}"#));
        assert!(!names_raw_value_token("not json RawValue"));
    }

    #[test]
    fn a_value_read_of_the_key_is_not_the_object_sent() {
        // Why the check exists: serde_json's Value reads the key's string as the object.
        let sent = r#"{"$serde_json::private::RawValue":"{\"path\":\"/safe\"}"}"#;
        let read: serde_json::Value = serde_json::from_str(sent).unwrap();
        assert_eq!(read, serde_json::json!({"path": "/safe"}));
    }
}
