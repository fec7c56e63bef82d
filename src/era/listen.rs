//! `subscriptions/listen` served on behalf of a handshake-era server (§4.11): which of the
//! asked notification types the server can deliver, the acknowledgement, which change
//! notifications a subscription receives, and how they are tagged.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::META_SUBSCRIPTION_ID;

/// What one subscription receives: the asked types the server can deliver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// Resource URIs; an update of a URI under one of them matches.
    pub uris: BTreeSet<String>,
    /// Tasks whose status changes (`notifications/tasks`, the tasks extension) it follows:
    /// filled by whoever holds the tasks, with the asked ids that name the caller's.
    pub task_ids: BTreeSet<String>,
}

impl Filter {
    /// Nothing asked for.
    pub fn is_empty(&self) -> bool {
        !self.tools
            && !self.prompts
            && !self.resources
            && self.uris.is_empty()
            && self.task_ids.is_empty()
    }

    /// The task ids a listen's `notifications` asks to follow (`taskIds`, the tasks
    /// extension's filter key); strings only.
    pub fn asked_task_ids(asked: &Value) -> impl Iterator<Item = &str> {
        asked
            .get("taskIds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// The subset of `asked` (the listen's `notifications`) that a server with these
    /// handshake `capabilities` honours: list-changed types it declares, and resource
    /// subscriptions only if it declares `resources.subscribe`.
    pub fn agreed(asked: &Value, capabilities: &Value) -> Filter {
        let flag = |key: &str, family: &str| {
            asked.get(key).and_then(Value::as_bool) == Some(true)
                && capabilities
                    .pointer(&format!("/{family}/listChanged"))
                    .and_then(Value::as_bool)
                    == Some(true)
        };
        let subscribe = capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            == Some(true);
        let uris = asked
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .filter(|_| subscribe)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        Filter {
            tools: flag("toolsListChanged", "tools"),
            prompts: flag("promptsListChanged", "prompts"),
            resources: flag("resourcesListChanged", "resources"),
            uris,
            task_ids: BTreeSet::new(),
        }
    }

    /// The `notifications` object of a listen request or of its acknowledgement.
    pub fn honoured(&self) -> Value {
        let mut honoured = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                honoured.insert(key.into(), true.into());
            }
        }
        if !self.uris.is_empty() {
            honoured.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        if !self.task_ids.is_empty() {
            honoured.insert("taskIds".into(), json!(self.task_ids));
        }
        Value::Object(honoured)
    }

    /// Whether a change notification belongs on this subscription.
    pub fn wants(&self, method: &str, params: Option<&Value>) -> bool {
        match method {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            "notifications/resources/updated" => params
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .is_some_and(|uri| self.uris.iter().any(|u| uri.starts_with(u.as_str()))),
            super::tasks::STATUS_NOTIFICATION => params
                .and_then(|p| p.get("taskId"))
                .and_then(Value::as_str)
                .is_some_and(|task| self.task_ids.contains(task)),
            _ => false,
        }
    }
}

/// The first message of a subscription.
pub fn acknowledgement(subscription_id: &Value, filter: &Filter) -> Vec<u8> {
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {META_SUBSCRIPTION_ID: subscription_id}, "notifications": filter.honoured()}});
    serde_json::to_vec(&ack).expect("JSON serializes")
}

/// A change notification as a subscription delivers it: tagged with the subscription's id.
pub fn tagged(method: &str, params: Option<&Value>, subscription_id: &Value) -> Vec<u8> {
    let mut params = params
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    params["_meta"] = json!({ META_SUBSCRIPTION_ID: subscription_id });
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
        .expect("JSON serializes")
}

/// The listen's result: a graceful end of the subscription.
pub fn end(subscription_id: &Value) -> Vec<u8> {
    let end = json!({"jsonrpc": "2.0", "id": subscription_id,
        "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: subscription_id}}});
    serde_json::to_vec(&end).expect("JSON serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_asked_and_can_be_delivered_is_agreed() {
        let caps = json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}});
        let asked = json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
            "resourceSubscriptions": ["file:///a"]});
        let filter = Filter::agreed(&asked, &caps);
        assert_eq!(
            filter.honoured(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
        assert!(filter.wants("notifications/tools/list_changed", None));
        assert!(!filter.wants("notifications/prompts/list_changed", None));
        assert!(filter.wants(
            "notifications/resources/updated",
            Some(&json!({"uri": "file:///a/b"}))
        ));
        assert!(!filter.wants(
            "notifications/resources/updated",
            Some(&json!({"uri": "file:///z"}))
        ));
        assert!(!filter.wants("notifications/message", None));
        let no_subscribe = Filter::agreed(&asked, &json!({"tools": {"listChanged": true}}));
        assert!(no_subscribe.uris.is_empty());
    }

    #[test]
    fn a_task_status_is_delivered_only_for_the_tasks_followed() {
        let asked = json!({"taskIds": ["task-a", 7, "task-b"]});
        let mut filter = Filter::agreed(&asked, &json!({}));
        assert!(
            filter.task_ids.is_empty(),
            "the holder of the tasks fills them"
        );
        assert!(filter.is_empty());
        filter.task_ids = Filter::asked_task_ids(&asked)
            .filter(|id| *id == "task-a")
            .map(str::to_owned)
            .collect();
        assert!(!filter.is_empty());
        assert_eq!(filter.honoured(), json!({"taskIds": ["task-a"]}));
        let status = |task: &str| json!({"taskId": task, "status": "working"});
        assert!(filter.wants("notifications/tasks", Some(&status("task-a"))));
        assert!(!filter.wants("notifications/tasks", Some(&status("task-b"))));
        assert!(!filter.wants("notifications/tasks", None));
    }

    #[test]
    fn delivered_notifications_carry_the_subscription_id_verbatim() {
        let line = tagged(
            "notifications/resources/updated",
            Some(&json!({"uri": "x"})),
            &json!(7),
        );
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["params"]["uri"], "x");
        assert_eq!(value["params"]["_meta"][META_SUBSCRIPTION_ID], 7);
        let ack: Value =
            serde_json::from_slice(&acknowledgement(&json!("l-1"), &Filter::default())).unwrap();
        assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], json!("l-1"));
        assert_eq!(ack["params"]["notifications"], json!({}));
    }
}
