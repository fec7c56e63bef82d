//! The per-request `_meta` envelope of 2026-07-28: reading a modern host's claim, stamping
//! one onto a legacy host's request, and stripping it before a legacy server sees it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
};

/// What a modern request declares about its sender.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub version: String,
    pub capabilities: Value,
    pub client_info: Option<Value>,
    pub log_level: Option<String>,
}

/// Why a modern claim cannot be served.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimError {
    /// Required keys are missing or have the wrong type: -32602.
    Malformed(String),
    /// A version the relay does not implement: -32022 with the supported list.
    Unsupported { requested: String },
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<BTreeMap<String, &'a RawValue>>,
}

/// True when `params._meta` carries the protocol-version key: the request claims to be
/// modern, and any defect in its envelope is an error, never a silent legacy fallback.
pub fn claims_modern(params: Option<&RawValue>) -> bool {
    let Some(params) = params else { return false };
    serde_json::from_str::<Params<'_>>(params.get())
        .ok()
        .and_then(|p| p.meta)
        .is_some_and(|meta| meta.contains_key(META_PROTOCOL_VERSION))
}

/// Reads and checks a modern request's envelope. `Ok(None)` when it makes no claim.
pub fn read_claim(params: Option<&RawValue>) -> Result<Option<Claim>, ClaimError> {
    let Some(params) = params else {
        return Ok(None);
    };
    let Ok(parsed) = serde_json::from_str::<Params<'_>>(params.get()) else {
        return Ok(None);
    };
    let Some(meta) = parsed.meta else {
        return Ok(None);
    };
    let Some(version) = meta.get(META_PROTOCOL_VERSION) else {
        return Ok(None);
    };
    let version: String = serde_json::from_str(version.get()).map_err(|_| {
        ClaimError::Malformed(format!(
            "_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"
        ))
    })?;
    let capabilities = match meta.get(META_CLIENT_CAPABILITIES) {
        Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(value @ Value::Object(_)) => value,
            _ => {
                return Err(ClaimError::Malformed(format!(
                    "_meta[\"{META_CLIENT_CAPABILITIES}\"] must be an object"
                )));
            }
        },
        None => {
            return Err(ClaimError::Malformed(format!(
                "missing required _meta key \"{META_CLIENT_CAPABILITIES}\""
            )));
        }
    };
    if !MODERN_VERSIONS.contains(&version.as_str()) {
        return Err(ClaimError::Unsupported { requested: version });
    }
    let client_info = meta
        .get(META_CLIENT_INFO)
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .filter(Value::is_object);
    let log_level = meta
        .get(META_LOG_LEVEL)
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    Ok(Some(Claim {
        version,
        capabilities,
        client_info,
        log_level,
    }))
}

/// The envelope the relay puts on a legacy host's requests to a modern server.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamp {
    pub version: String,
    pub capabilities: Value,
    pub client_info: Value,
    pub log_level: Option<String>,
}

impl Stamp {
    /// The stamp's `_meta` members as JSON text (`"key":value,…`), ready to splice into a
    /// request's `_meta` with [`stamped_params`]: computed once per host profile, not per
    /// request.
    pub fn members(&self) -> String {
        let mut meta = Map::new();
        self.put(&mut meta);
        let text = serde_json::to_string(&meta).expect("a JSON map serializes");
        text[1..text.len() - 1].to_owned()
    }
}

impl Stamp {
    /// Writes the stamp's keys into `meta`, removing the log level when none is set: the
    /// one definition both [`stamp`] and [`Stamp::members`] use.
    fn put(&self, meta: &mut Map<String, Value>) {
        meta.insert(META_PROTOCOL_VERSION.into(), self.version.clone().into());
        meta.insert(META_CLIENT_CAPABILITIES.into(), self.capabilities.clone());
        meta.insert(META_CLIENT_INFO.into(), self.client_info.clone());
        match &self.log_level {
            Some(level) => meta.insert(META_LOG_LEVEL.into(), level.clone().into()),
            None => meta.remove(META_LOG_LEVEL),
        };
    }
}

/// The keys a stamp owns: whatever the host put under them is replaced (or, for the log
/// level, removed when the host set none).
const STAMPED_KEYS: [&str; 4] = [
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
];

/// An object's members in the order written, values left as raw text.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// For each member, whether it is the last with its key: a repeated key is sent once, with
/// the value a parser keeps (the last), so the server cannot read another than the relay
/// did. A few members are compared pairwise; many (a hostile host's params may hold a
/// million keys) go through a set, so the cost stays linear.
fn last_of_each(members: &[(Cow<'_, str>, &RawValue)]) -> Vec<bool> {
    if members.len() <= 16 {
        return (0..members.len())
            .map(|at| {
                !members[at + 1..]
                    .iter()
                    .any(|(later, _)| *later == members[at].0)
            })
            .collect();
    }
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    let mut last: Vec<bool> = members
        .iter()
        .rev()
        .map(|(key, _)| seen.insert(key.as_ref()))
        .collect();
    last.reverse();
    last
}

fn push_member(out: &mut String, key: &str, value: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    out.push_str(&serde_json::to_string(key).expect("a string serializes"));
    out.push(':');
    out.push_str(value);
}

/// A host's params with the envelope spliced in: the text to send, and the host's own
/// members (borrowed, as written) for whatever else the request needs from them.
pub struct Stamped<'a> {
    pub text: String,
    host: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Stamped<'a> {
    /// The host's member `key` (the last, if repeated), as written.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.host
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }
}

/// `params` (absent counts as `{}`) with the stamp's `members` in `_meta`, as JSON text, the
/// same as [`stamp`] on [`params_object`] but without building a tree: every other member
/// (a progress token, trace context, the arguments) is copied as the host wrote it. `None`
/// when `params` is not an object. A repeated `_meta` counts once (the last, as a parser
/// keeps it).
pub fn stamped_params<'a>(params: Option<&'a [u8]>, members: &str) -> Option<Stamped<'a>> {
    let mut out = String::with_capacity(params.map_or(0, <[u8]>::len) + members.len() + 16);
    out.push('{');
    let host = match params {
        Some(params) => serde_json::from_slice::<Members<'a>>(params).ok()?.0,
        None => Vec::new(),
    };
    let mut host_meta = None;
    for ((key, value), last) in host.iter().zip(last_of_each(&host)) {
        if key == "_meta" {
            host_meta = Some(*value);
        } else if last {
            push_member(&mut out, key, value.get());
        }
    }
    let kept = host_meta
        .and_then(|meta| serde_json::from_str::<Members<'_>>(meta.get()).ok())
        .map(|Members(meta)| meta)
        .unwrap_or_default();
    let mut meta = String::with_capacity(members.len() + 64);
    meta.push('{');
    for ((key, value), last) in kept.iter().zip(last_of_each(&kept)) {
        if last && !STAMPED_KEYS.contains(&key.as_ref()) {
            push_member(&mut meta, key, value.get());
        }
    }
    if !members.is_empty() {
        if !meta.ends_with('{') {
            meta.push(',');
        }
        meta.push_str(members);
    }
    meta.push('}');
    push_member(&mut out, "_meta", &meta);
    out.push('}');
    Some(Stamped { text: out, host })
}

/// `params` (absent counts as `{}`) as an object; `None` if they are not an object.
pub fn params_object(params: Option<&RawValue>) -> Option<Map<String, Value>> {
    match params {
        None => Some(Map::new()),
        Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        },
    }
}

/// Puts the stamp's keys into `params._meta`, keeping everything else (a progress token,
/// trace context, unknown keys) as it was.
pub fn stamp(params: &mut Map<String, Value>, stamp: &Stamp) {
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    stamp.put(meta.as_object_mut().expect("made an object above"));
}

/// Removes the envelope keys (`io.modelcontextprotocol/…`) before a request goes to a legacy
/// server, which may refuse them on a handshake session; drops `_meta` if nothing is left.
pub fn strip(params: &mut Map<String, Value>) {
    let Some(Value::Object(meta)) = params.get_mut("_meta") else {
        return;
    };
    meta.retain(|key, _| !key.starts_with("io.modelcontextprotocol/"));
    if meta.is_empty() {
        params.remove("_meta");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn a_claim_is_the_protocol_version_key() {
        let modern = raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#);
        assert!(claims_modern(Some(&modern)));
        let legacy = raw(r#"{"_meta":{"progressToken":1}}"#);
        assert!(!claims_modern(Some(&legacy)));
        assert!(!claims_modern(None));
    }

    #[test]
    fn reads_a_complete_claim() {
        let params = raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"h","version":"1"},"io.modelcontextprotocol/logLevel":"debug"}}"#,
        );
        let claim = read_claim(Some(&params)).unwrap().unwrap();
        assert_eq!(claim.version, "2026-07-28");
        assert_eq!(claim.capabilities, json!({"elicitation":{}}));
        assert_eq!(claim.log_level.as_deref(), Some("debug"));
    }

    #[test]
    fn a_claim_without_capabilities_is_malformed() {
        let params = raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#);
        assert!(matches!(
            read_claim(Some(&params)),
            Err(ClaimError::Malformed(m)) if m.contains("clientCapabilities")
        ));
    }

    #[test]
    fn an_unknown_version_is_unsupported() {
        let params = raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        );
        assert_eq!(
            read_claim(Some(&params)),
            Err(ClaimError::Unsupported {
                requested: "1900-01-01".into()
            })
        );
    }

    fn a_stamp() -> Stamp {
        Stamp {
            version: "2026-07-28".into(),
            capabilities: json!({"sampling":{}}),
            client_info: json!({"name":"h","version":"1"}),
            log_level: None,
        }
    }

    /// The text splice must mean exactly what stamping the parsed tree means.
    #[test]
    fn splicing_the_stamp_equals_stamping_the_tree() {
        let cases = [
            None,
            Some(r#"{}"#),
            Some(r#"{"name":"echo","arguments":{"i":1}}"#),
            Some(r#"{"name":"e\"cho","_meta":{"progressToken":7,"vendor.x/y":[1,2]}}"#),
            Some(
                r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/other":1},"cursor":"c"}"#,
            ),
            Some(r#"{"_meta":null,"x":1}"#),
            Some(r#"{"_meta":[1],"x":1}"#),
            Some(r#"{"_meta":{"a":1},"x":{"_meta":{"nested":true}},"_meta":{"b":2}}"#),
            Some("{ \"spaced\" : [ 1 , 2 ] }"),
        ];
        for stamp_with_level in [
            a_stamp(),
            Stamp {
                log_level: Some("info".into()),
                ..a_stamp()
            },
        ] {
            for case in cases {
                let spliced = stamped_params(case.map(str::as_bytes), &stamp_with_level.members())
                    .unwrap_or_else(|| panic!("{case:?} is an object"))
                    .text;
                let mut tree = params_object(case.map(raw).as_deref()).unwrap();
                stamp(&mut tree, &stamp_with_level);
                let spliced: Value = serde_json::from_str(&spliced).unwrap();
                assert_eq!(spliced, Value::Object(tree), "{case:?}");
            }
        }
    }

    #[test]
    fn a_repeated_key_is_sent_once_with_the_last_value() {
        let params = br#"{"name":"a","x":1,"name":"b","_meta":{"k":1,"k":2}}"#;
        let stamped = stamped_params(Some(params), &a_stamp().members()).unwrap();
        assert!(!stamped.text.contains(r#""name":"a""#), "{}", stamped.text);
        assert_eq!(
            stamped.text.matches(r#""name":"b""#).count(),
            1,
            "{}",
            stamped.text
        );
        assert!(stamped.text.contains(r#""k":2"#) && !stamped.text.contains(r#""k":1"#));
    }

    #[test]
    fn many_repeated_keys_are_sent_once_each_too() {
        let members: Vec<String> = (0..40).map(|n| format!(r#""k{}":{n}"#, n % 20)).collect();
        let params = format!("{{{}}}", members.join(","));
        let stamped = stamped_params(Some(params.as_bytes()), &a_stamp().members()).unwrap();
        for k in 0..20 {
            assert_eq!(stamped.text.matches(&format!(r#""k{k}":"#)).count(), 1);
            assert!(
                stamped.text.contains(&format!(r#""k{k}":{}"#, k + 20)),
                "the last value"
            );
        }
    }

    #[test]
    fn the_host_members_are_kept_as_written() {
        let params = br#"{"name":"a","arguments":{"x":1},"name":"b"}"#;
        let stamped = stamped_params(Some(params), &a_stamp().members()).unwrap();
        assert_eq!(stamped.get("name").map(RawValue::get), Some(r#""b""#));
        assert_eq!(
            stamped.get("arguments").map(RawValue::get),
            Some(r#"{"x":1}"#)
        );
        assert!(stamped.get("uri").is_none());
    }

    #[test]
    fn splicing_refuses_params_that_are_not_an_object() {
        for case in ["[1]", "3", "\"x\"", "null", "{", "{\"a\":}"] {
            assert!(
                stamped_params(Some(case.as_bytes()), &a_stamp().members()).is_none(),
                "{case}"
            );
        }
    }

    #[test]
    fn stamping_keeps_the_progress_token_and_stripping_removes_only_the_envelope() {
        let params = raw(r#"{"name":"t","_meta":{"progressToken":7,"vendor.x/y":1}}"#);
        let mut map = params_object(Some(&params)).unwrap();
        stamp(
            &mut map,
            &Stamp {
                version: "2026-07-28".into(),
                capabilities: json!({}),
                client_info: json!({"name":"h","version":"1"}),
                log_level: Some("info".into()),
            },
        );
        let meta = &map["_meta"];
        assert_eq!(meta["progressToken"], 7);
        assert_eq!(meta[META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(meta[META_LOG_LEVEL], "info");
        strip(&mut map);
        assert_eq!(map["_meta"], json!({"progressToken":7,"vendor.x/y":1}));
        let mut bare = params_object(Some(&raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        )))
        .unwrap();
        strip(&mut bare);
        assert!(!bare.contains_key("_meta"));
    }
}
