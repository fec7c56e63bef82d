//! A request of the relay's own to a 2026-07-28 server (its `server/discover`, what it
//! asks about a host's tasks): sent under an id of the relay's, its side messages ignored.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::era::request::request_line;
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::context::Ctx;
use crate::relay::detect::modern_headers;
use crate::relay::gate::Failure;
use crate::relay::link::session::Wire;

/// A request of the relay's own to the modern server; returns the answer line.
pub async fn own_request(
    ctx: &Ctx,
    version: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Vec<u8>, Failure> {
    let id = ctx.next_upstream_id("own");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let headers = modern_headers(version, method, Some(params))?;
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, method, params)),
        id: &crate::jsonrpc::message::IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Modern {
            headers: &headers,
            long_lived: false,
        },
        replay_safe: true,
    };
    call(ctx, outgoing, &mut |_, _| Aside::Ignore).await
}
