//! The 2026-07-28 envelope and validation ladder (`era::envelope`, `serve::ladder`): never
//! panic; a claim the ladder accepts is the claim the envelope reads; anything that reads as
//! a claim is seen as claiming the modern era; every rejection is a 4xx.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_stdio::era::envelope;
use mcp_stdio::serve::ladder;
use serde_json::value::RawValue;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else { return };
    // method \n header lines ("name: value") \n\n params
    let (head, params) = text.split_once("\n\n").unwrap_or(("tools/call", text));
    let mut lines = head.lines();
    let method = lines.next().unwrap_or_default();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let Ok(params) = serde_json::from_str::<Box<RawValue>>(params) else { return };
    let params = Some(params.as_ref());
    let claim = envelope::read_claim(params);
    if matches!(claim, Ok(Some(_))) {
        assert!(envelope::claims_modern(params), "a claim claims the modern era");
    }
    let lookup = |name: &str| {
        let mut found = headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone());
        let first = found.next();
        if found.next().is_some() { None } else { first }
    };
    match ladder::check(method, params, lookup) {
        Ok(accepted) => assert_eq!(Ok(Some(accepted)), claim, "the ladder's claim is the envelope's"),
        Err(rejection) => assert!((400..500).contains(&rejection.status), "{rejection:?}"),
    }
    if let Some(mut object) = envelope::params_object(params) {
        envelope::strip(&mut object);
        let line = mcp_stdio::era::request::request_line("1", method, &object);
        // Syntax only: serde_json's Value refuses an object led by its private RawValue key,
        // which is still JSON (WORKAROUNDS.md); a raw read checks syntax alone.
        assert!(serde_json::from_slice::<Box<RawValue>>(&line).is_ok(), "the request line is JSON");
    }
});
