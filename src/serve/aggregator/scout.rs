//! The aggregate endpoint's own session with one server: its handshake (what it can do,
//! its instructions) and its lists, every page of them, read as any client would.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::settings::Members;
use crate::era::paging::{Pages, with_cursor};
use crate::era::{LATEST_LEGACY_VERSION, relay_info};
use crate::jsonrpc::message::IdKey;
use crate::serve::aggregate::catalog::items_of;
use crate::serve::aggregate::route::List;
use crate::serve::backend::{Unanswered, ask};
use crate::serve::session::Session;

/// Ids of the gateway's own requests: never reused, and named so a log shows whose they are.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub fn own_id(what: &str) -> IdKey {
    IdKey::Str(format!(
        "mcp-stdio-aggregate-{what}-{}",
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Asks `session` one request of the gateway's own and gives its result, or why not.
pub async fn request(
    session: &Session,
    what: &str,
    method: &str,
    params: Value,
    wait: Duration,
) -> Result<Value, String> {
    let id = own_id(what);
    let IdKey::Str(text) = &id else {
        unreachable!("own ids are strings")
    };
    let line = json!({"jsonrpc": "2.0", "id": text, "method": method, "params": params});
    session.touch();
    let answer = ask(&*session.backend, id, Bytes::from(line.to_string()), wait)
        .await
        .map_err(|why| match why {
            Unanswered::Refused => {
                format!("{method} could not be registered (the session is full)")
            }
            Unanswered::NotSent => {
                format!("{method} could not be sent (the server is not reading)")
            }
            Unanswered::Failed(why) => why,
            Unanswered::TimedOut => format!(
                "no answer to {method} within {} s (--aggregate-timeout)",
                wait.as_secs_f64()
            ),
        })?;
    let mut answer: Value =
        serde_json::from_slice(&answer).map_err(|_| format!("{method}: the answer is not JSON"))?;
    if let Some(error) = answer.get("error") {
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(format!("{method} was refused: {message}"));
    }
    Ok(answer
        .get_mut("result")
        .map(Value::take)
        .unwrap_or(Value::Null))
}

/// Opens the endpoint's own session with `server` and gives it its handshake; the answer
/// to `initialize` comes back with the session.
pub async fn start(
    members: &dyn Members,
    server: &str,
    wait: Duration,
    capabilities: Value,
) -> Result<(Arc<Session>, Value), String> {
    let session = members.open(server, None, true)?;
    // The endpoint's own session lasts as long as the endpoint: never idle to the reaper.
    session
        .busy
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Exactly what the profile's clients can be asked: a server that lists tools only to
    // clients able to answer their questions lists them to this profile as to its clients.
    let params = json!({
        "protocolVersion": LATEST_LEGACY_VERSION,
        "capabilities": capabilities,
        "clientInfo": relay_info(),
    });
    let handshake = match request(&session, "scout", "initialize", params, wait).await {
        Ok(result) => result,
        Err(why) => {
            session.end.cancel();
            return Err(why);
        }
    };
    let initialized =
        Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    if session.backend.send(initialized, wait).await.is_err() {
        session.end.cancel();
        return Err("the server stopped reading after its handshake".into());
    }
    Ok((session, handshake))
}

/// Whether a server's handshake says it has `list` at all (asking one that has not is an
/// error the server would log).
pub fn offers(handshake: &Value, list: List) -> bool {
    let feature = match list {
        List::Tools => "tools",
        List::Prompts => "prompts",
        List::Resources | List::ResourceTemplates => "resources",
    };
    handshake
        .get("capabilities")
        .and_then(|c| c.get(feature))
        .is_some()
}

/// Every page of `list` from `session`, its items in order; at most `max_items` (past
/// that, the read stops with an error rather than hold more).
pub async fn read_list(
    session: &Session,
    list: List,
    wait: Duration,
    max_items: usize,
) -> Result<Vec<Value>, String> {
    let mut pages = Pages::new(max_items.max(1));
    let mut items = Vec::new();
    while let Some(cursor) = pages.next_page() {
        let params = Value::Object(with_cursor(Map::new(), cursor));
        let page = request(session, "list", list.method(), params, wait).await?;
        pages.after(&page);
        items.extend(items_of(list, std::slice::from_ref(&page)));
        if items.len() > max_items {
            return Err(format!(
                "its {} come to more than {max_items} (--aggregate-max-list-items)",
                list.key()
            ));
        }
    }
    Ok(items)
}
