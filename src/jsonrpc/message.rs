//! Classifies one JSON-RPC message by borrowing only its routing fields.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// What a message is, by the JSON-RPC 2.0 rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// A borrowed view of one message: the routing fields, with everything else left as raw text.
#[derive(Debug)]
pub struct Message<'a> {
    pub kind: Kind,
    pub id: Option<&'a RawValue>,
    pub method: Option<Cow<'a, str>>,
    pub params: Option<&'a RawValue>,
    pub result: Option<&'a RawValue>,
    pub error: Option<&'a RawValue>,
}

/// Why a line is not a usable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Not JSON at all: answered with -32700.
    NotJson(String),
    /// JSON, but not a JSON-RPC 2.0 message: answered with -32600 (with the id, if usable).
    NotMessage {
        reason: &'static str,
        id: Option<String>,
    },
}

/// The fields as they appear on the wire. `id` keeps `null` distinct from absent.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present_str")]
    method: Option<Option<Cow<'a, str>>>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// A present field, even `null`, becomes `Some(raw)`; only an absent one is `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// `method` must be a string; anything else is kept as `Some(None)` so it can be rejected.
fn present_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<Cow<'de, str>>>, D::Error> {
    let raw = <&RawValue>::deserialize(d)?;
    Ok(Some(serde_json::from_str::<Cow<'de, str>>(raw.get()).ok()))
}

/// True when the bytes (after leading whitespace) open a JSON array: a JSON-RPC batch.
pub fn is_batch(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// Splits a batch into its elements, each still raw.
pub fn split_batch(bytes: &[u8]) -> Result<Vec<&RawValue>, Invalid> {
    serde_json::from_slice::<Vec<&RawValue>>(bytes).map_err(|e| Invalid::NotJson(e.to_string()))
}

/// Parses and classifies one message.
pub fn parse(bytes: &[u8]) -> Result<Message<'_>, Invalid> {
    let envelope: Envelope<'_> = match serde_json::from_slice(bytes) {
        Ok(envelope) => envelope,
        Err(e) if e.is_data() => {
            // Valid JSON of the wrong shape (an array element that is a number, say).
            return match serde_json::from_slice::<&RawValue>(bytes) {
                Ok(_) => Err(not_message(
                    "a JSON-RPC message must be a JSON object",
                    None,
                )),
                Err(e) => Err(Invalid::NotJson(e.to_string())),
            };
        }
        Err(e) => return Err(Invalid::NotJson(e.to_string())),
    };
    // Only a refusal needs the id as text: a well-formed message allocates nothing here.
    let id_text = || {
        envelope
            .id
            .filter(|id| is_valid_id(id))
            .map(|id| id.get().to_owned())
    };
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(not_message("\"jsonrpc\" must be \"2.0\"", id_text()));
    }
    if let Some(id) = envelope.id
        && !is_valid_id(id)
        && !(envelope.method.is_none() && id.get() == "null")
    {
        return Err(not_message("\"id\" must be a string or a number", None));
    }
    let kind = match (&envelope.method, envelope.id) {
        (Some(None), _) => return Err(not_message("\"method\" must be a string", id_text())),
        (Some(Some(_)), Some(_)) => Kind::Request,
        (Some(Some(_)), None) => Kind::Notification,
        (None, Some(_)) => match (envelope.result.is_some(), envelope.error.is_some()) {
            (true, false) | (false, true) => Kind::Response,
            _ => {
                return Err(not_message(
                    "a response must carry exactly one of \"result\" and \"error\"",
                    id_text(),
                ));
            }
        },
        (None, None) => {
            return Err(not_message(
                "a message needs \"method\" (request or notification) or \"id\" with \"result\"/\"error\" (response)",
                None,
            ));
        }
    };
    Ok(Message {
        kind,
        id: envelope.id,
        method: envelope.method.flatten(),
        params: envelope.params,
        result: envelope.result,
        error: envelope.error,
    })
}

fn not_message(reason: &'static str, id: Option<String>) -> Invalid {
    Invalid::NotMessage { reason, id }
}

fn is_valid_id(id: &RawValue) -> bool {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// A request id in a form that compares equal however the peer spelled it:
/// strings by value (escapes resolved), numbers by their literal text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IdKey {
    Str(String),
    Num(String),
}

impl IdKey {
    /// The key of a raw id; `None` for `null` or a non-scalar.
    pub fn from_raw(id: &RawValue) -> Option<IdKey> {
        let text = id.get().trim();
        match text.as_bytes().first()? {
            b'"' => serde_json::from_str::<String>(text).ok().map(IdKey::Str),
            b'-' | b'0'..=b'9' => Some(IdKey::Num(text.to_owned())),
            _ => None,
        }
    }
}

impl fmt::Display for IdKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdKey::Str(s) => write!(f, "{s:?}"),
            IdKey::Num(n) => f.write_str(n),
        }
    }
}

/// Reads `params.requestId` of a `notifications/cancelled`.
pub fn cancelled_request_id(params: Option<&RawValue>) -> Option<IdKey> {
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: &'a RawValue,
    }
    let params: Params<'_> = serde_json::from_str(params?.get()).ok()?;
    IdKey::from_raw(params.request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_three_kinds() {
        let r = parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert_eq!(r.kind, Kind::Request);
        let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(n.kind, Kind::Notification);
        let s = parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(s.kind, Kind::Response);
        let e = parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}"#).unwrap();
        assert_eq!(e.kind, Kind::Response);
    }

    #[test]
    fn keeps_big_integer_ids_as_text() {
        let m =
            parse(br#"{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"}"#).unwrap();
        assert_eq!(m.id.unwrap().get(), "12345678901234567890123");
        assert_eq!(
            IdKey::from_raw(m.id.unwrap()),
            Some(IdKey::Num("12345678901234567890123".into()))
        );
    }

    #[test]
    fn string_ids_compare_by_value() {
        let a: &RawValue = serde_json::from_str(r#""\u0061b""#).unwrap();
        let b: &RawValue = serde_json::from_str(r#""ab""#).unwrap();
        assert_eq!(IdKey::from_raw(a), IdKey::from_raw(b));
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        assert!(matches!(parse(b"not json"), Err(Invalid::NotJson(_))));
        assert!(matches!(parse(b"42"), Err(Invalid::NotMessage { .. })));
        assert!(matches!(
            parse(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#),
            Err(Invalid::NotMessage { id: Some(ref id), .. }) if id == "3"
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            Err(Invalid::NotMessage { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":7}"#),
            Err(Invalid::NotMessage { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1}"#),
            Err(Invalid::NotMessage { .. })
        ));
    }

    #[test]
    fn finds_the_cancelled_request_id() {
        let m = parse(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r1"}}"#,
        )
        .unwrap();
        assert_eq!(
            cancelled_request_id(m.params),
            Some(IdKey::Str("r1".into()))
        );
    }

    #[test]
    fn detects_batches() {
        assert!(is_batch(b"  [1]"));
        assert!(!is_batch(b"{}"));
        assert_eq!(split_batch(br#"[{"a":1}, 2]"#).unwrap().len(), 2);
    }
}
