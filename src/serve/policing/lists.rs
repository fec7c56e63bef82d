//! A list answer as one principal may see it: each tool, prompt, resource or template the
//! list phase hides taken out of the page, the server's cursor left as it was (a short or
//! empty page with a `nextCursor` is a page like any other, so paging stays right), and
//! the page marked private to its caller. The tools' annotations are remembered on the way
//! for the calls that follow. A list answer the filter cannot read is not passed on
//! unfiltered: the client gets an error under its request's id.

use std::sync::Arc;

use serde_json::Value;

use super::about::{About, owner};
use crate::jsonrpc::error::{INTERNAL_ERROR, error_response};
use crate::policy::{Client, Decision, Input, Policy, Principal, Target};
use crate::serve::backend::Owner;
use crate::serve::session::Session;

/// The filter of one list request's answer (made by `request::check`).
pub struct ListFilter {
    pub(super) policy: Arc<Policy>,
    pub(super) principal: Arc<Principal>,
    pub(super) client: Client,
    pub(super) server: String,
    pub(super) endpoint: String,
    pub(super) method: String,
    pub(super) session: Arc<Session>,
    /// The client's id, raw JSON: an answer that cannot be filtered is refused under it.
    pub(super) raw_id: String,
}

impl ListFilter {
    /// The answer `line` with what this principal may not see taken out. A line that is
    /// not a list answer (an error, a notification, a question for the client) passes as
    /// it is; one whose list cannot be read (not JSON, a `result` that is not an object, a
    /// list that is not an array) becomes an error: what cannot be filtered is not shown.
    pub fn apply(&self, line: &[u8]) -> Vec<u8> {
        let Ok(mut answer) = serde_json::from_slice::<Value>(line) else {
            return self.unreadable("is not JSON");
        };
        let (key, field) = match self.method.as_str() {
            "tools/list" => ("tools", "name"),
            "prompts/list" => ("prompts", "name"),
            "resources/list" => ("resources", "uri"),
            _ => ("resourceTemplates", "uriTemplate"),
        };
        let Some(result) = answer.get_mut("result") else {
            return line.to_vec();
        };
        let Some(result) = result.as_object_mut() else {
            return self.unreadable("has a result that is not an object");
        };
        match result.get_mut(key) {
            Some(Value::Array(items)) => {
                if key == "tools" {
                    self.session.tools.record(items);
                }
                items.retain(|item| {
                    let Some(public) = item.get(field).and_then(Value::as_str) else {
                        return false;
                    };
                    self.visible(key, public, item)
                });
            }
            Some(_) => return self.unreadable(&format!("has `{key}` that is not an array")),
            None => {}
        }
        // What one principal sees is not another's to reuse.
        if let Some(scope) = result.get_mut("cacheScope") {
            *scope = "private".into();
        }
        serde_json::to_vec(&answer).expect("JSON serializes")
    }

    /// The error the client gets for a list answer the policy cannot filter.
    fn unreadable(&self, what: &str) -> Vec<u8> {
        tracing::warn!(method = %self.method, "the server's list answer {what}; refused, since the policy cannot filter it");
        error_response(
            &self.raw_id,
            INTERNAL_ERROR,
            &format!(
                "the server's {} answer {what}, so the gateway's policy cannot filter it and shows none of it; the server must answer as MCP says",
                self.method
            ),
            None,
        )
    }

    fn visible(&self, key: &str, public: &str, item: &Value) -> bool {
        let about = match key {
            "tools" => About::Tool(public),
            "prompts" => About::Prompt(public),
            _ => About::Resource(public),
        };
        let owner = owner(&self.session, about);
        let (server, own) = match &owner {
            Owner::Member { server, name } => (server.as_str(), name.as_str()),
            Owner::Itself => (self.server.as_str(), public),
            // An item no server is known to publish is not shown.
            Owner::Unknown => return false,
        };
        let target = match about {
            About::Tool(_) => Target::Tool {
                name: own,
                annotations: Some(item.get("annotations").unwrap_or(&Value::Null)),
            },
            About::Prompt(_) => Target::Prompt { name: own },
            About::Resource(_) => Target::Resource { uri: own },
        };
        let input = Input {
            principal: &self.principal,
            server,
            endpoint: &self.endpoint,
            method: &self.method,
            target,
            arguments: None,
            client: &self.client,
        };
        match self.policy.visible(&input) {
            Decision::Allow => true,
            Decision::Hidden { .. } | Decision::Refused { .. } => false,
        }
    }
}
