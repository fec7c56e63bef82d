//! JSON-RPC message classification (`jsonrpc::message::parse`): never panics; what it
//! calls a request has a method and an id that keys, a notification a method and no id, a
//! response an id and no method; batches split into their elements.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_stdio::jsonrpc::message::{self, IdKey, Kind};

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = message::parse(data) {
        match parsed.kind {
            Kind::Request => {
                assert!(parsed.method.is_some());
                let id = parsed.id.expect("a request has an id");
                assert!(IdKey::from_raw(id).is_some(), "a request's id keys");
            }
            Kind::Notification => assert!(parsed.method.is_some() && parsed.id.is_none()),
            Kind::Response => assert!(parsed.method.is_none()),
        }
        let _ = message::cancelled_request_id(parsed.params);
    }
    if message::is_batch(data) {
        let _ = message::split_batch(data);
    }
    let _ = mcp_stdio::jsonrpc::framing::trimmed(data);
    let _ = mcp_stdio::jsonrpc::framing::one_line(data);
});
