//! The legacy pass-through: a host request to a server of the same era goes upstream
//! unchanged, through the one request engine; whatever happens, the gate gets an answer
//! or an error for it.

use std::sync::Arc;

use crate::relay::call::{Outgoing, call_for_host};
use crate::relay::context::Ctx;
use crate::relay::link::session::Wire;
use crate::relay::methods::is_replay_safe;
use crate::relay::request::Call;

pub async fn serve(ctx: Arc<Ctx>, call: Call) {
    let request = Outgoing {
        body: call.line.clone(),
        id: &call.id,
        raw_id: &call.raw_id,
        wire: Wire::Legacy {
            initialize: call.method == "initialize",
        },
        replay_safe: is_replay_safe(&call.method),
    };
    match call_for_host(&ctx, request).await {
        // Empty: already delivered (from the HTTP+SSE stream, or an `id: null` error).
        Ok(answer) if answer.is_empty() => {}
        Ok(answer) => {
            ctx.gate.deliver(&call.id, answer).await;
        }
        Err(failure) => ctx.gate.fail(&call.id, &failure).await,
    }
}
