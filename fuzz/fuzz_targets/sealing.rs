//! Session sealing (`cluster_key`): what is sealed opens to itself, under the current key
//! and after a rotation under the previous one; another purpose, another key, or any change
//! to the sealed text opens to nothing; arbitrary text never opens.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_stdio::cluster_key::{ClusterKey, Sealer};

struct Keys {
    session: Sealer,
    other_purpose: Sealer,
    other_key: Sealer,
    rotated: Sealer,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let old = "fuzz-old-key-0123456789abcdefghijklmnopqrstuvwxyz";
        let new = "fuzz-new-key-0123456789abcdefghijklmnopqrstuvwxyz";
        let current = ClusterKey::parse(old).unwrap();
        Keys {
            session: current.sealer("session"),
            other_purpose: current.sealer("request-state"),
            other_key: ClusterKey::parse(new).unwrap().sealer("session"),
            rotated: ClusterKey::parse(&format!("{new}\n{old}")).unwrap().sealer("session"),
        }
    })
}

fuzz_target!(|input: &[u8]| {
    let keys = keys();
    if let Ok(text) = std::str::from_utf8(input) {
        assert_eq!(keys.session.open(text), None, "arbitrary text opened: {text:?}");
    }
    let sealed = keys.session.seal(input);
    assert_eq!(keys.session.open(&sealed).as_deref(), Some(input));
    assert_eq!(keys.rotated.open(&sealed).as_deref(), Some(input), "the previous key opens it");
    assert_eq!(keys.other_purpose.open(&sealed), None);
    assert_eq!(keys.other_key.open(&sealed), None);
    let bytes = sealed.as_bytes();
    let at = input.first().map_or(0, |b| *b as usize) % bytes.len();
    for replacement in [b'A', b'_', b'-', b'0'] {
        if bytes[at] != replacement {
            let mut tampered = bytes.to_vec();
            tampered[at] = replacement;
            let tampered = String::from_utf8(tampered).unwrap();
            assert_eq!(keys.session.open(&tampered), None, "a changed byte at {at} still opened");
        }
    }
    assert_eq!(keys.session.open(&sealed[..sealed.len() - 1]), None, "truncated");
});
