//! What a session knows of its tools' annotations, for rules that read them at call time:
//! remembered from the lists its client reads, and looked up with a `tools/list` of the
//! gateway's own when a call names a tool not seen yet. Forgotten when the server says
//! its tools changed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::era::paging::{Pages, with_cursor};
use crate::era::tools::MAX_LIST_PAGES;
use crate::era::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_VERSION};
use crate::jsonrpc::message::IdKey;
use crate::serve::backend::{Backend, ask};

/// A session's tools' annotations, by the name its client sees.
pub struct ToolAnnotations {
    known: Mutex<Known>,
    /// One lookup at a time: the calls that wait for it find the tool known after it.
    lookup: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

struct Known {
    by_name: HashMap<String, Value>,
    /// Every page was read: a name not here is not a tool.
    complete: bool,
    changes: broadcast::Receiver<Bytes>,
}

impl Known {
    /// Forgets everything if the server said its tools changed since the last look.
    fn forget_if_changed(&mut self) {
        loop {
            match self.changes.try_recv() {
                Ok(line) => {
                    if memchr::memmem::find(&line, b"notifications/tools/list_changed").is_some() {
                        self.by_name.clear();
                        self.complete = false;
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    self.by_name.clear();
                    self.complete = false;
                }
                Err(_) => return,
            }
        }
    }
}

impl ToolAnnotations {
    /// `changes`: the server's notifications outside any request.
    pub fn new(changes: broadcast::Receiver<Bytes>) -> Self {
        ToolAnnotations {
            known: Mutex::new(Known {
                by_name: HashMap::new(),
                complete: false,
                changes,
            }),
            lookup: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Remembers the annotations of the tools in a list page.
    pub fn record(&self, tools: &[Value]) {
        let mut known = self.known.lock().expect("tools lock");
        known.forget_if_changed();
        for tool in tools {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                let annotations = tool.get("annotations").cloned().unwrap_or(Value::Null);
                known.by_name.insert(name.to_owned(), annotations);
            }
        }
    }

    fn remembered(&self, name: &str) -> Option<Option<Value>> {
        let mut known = self.known.lock().expect("tools lock");
        known.forget_if_changed();
        match known.by_name.get(name) {
            Some(annotations) => Some(Some(annotations.clone())),
            None if known.complete => Some(None),
            None => None,
        }
    }

    /// Tool `name`'s annotations: remembered, or read from the server's whole list (a
    /// tool it does not list has none: the defaults apply, and the server will answer the
    /// call as it answers an unknown tool).
    pub async fn of(
        &self,
        backend: &dyn Backend,
        name: &str,
        modern_child: bool,
        wait: Duration,
    ) -> Option<Value> {
        if let Some(found) = self.remembered(name) {
            return found;
        }
        let _one = self.lookup.lock().await;
        if let Some(found) = self.remembered(name) {
            return found;
        }
        let read_all = self.read(backend, "tools/list", modern_child, wait).await;
        let mut known = self.known.lock().expect("tools lock");
        known.complete = read_all;
        known.by_name.get(name).cloned()
    }

    /// Reads every page of the list `method` through `backend`, as a client would (the
    /// tools' annotations remembered on the way); whether every page came.
    pub async fn read(
        &self,
        backend: &dyn Backend,
        method: &str,
        modern_child: bool,
        wait: Duration,
    ) -> bool {
        let mut pages = Pages::new(MAX_LIST_PAGES);
        while let Some(cursor) = pages.next_page() {
            let mut params = Map::new();
            if modern_child {
                params.insert(
                    "_meta".into(),
                    json!({META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}),
                );
            }
            let params = with_cursor(params, cursor);
            let Some(result) = self.ask(backend, method, params, wait).await else {
                return false;
            };
            if let Some(tools) = result.get("tools").and_then(Value::as_array) {
                self.record(tools);
            }
            pages.after(&result);
        }
        true
    }

    async fn ask(
        &self,
        backend: &dyn Backend,
        method: &str,
        params: Map<String, Value>,
        wait: Duration,
    ) -> Option<Value> {
        let id = format!(
            "mcp-stdio-policy-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        );
        let line = Bytes::from(crate::era::request::request_line(
            &serde_json::to_string(&id).expect("a string"),
            method,
            &params,
        ));
        let answer = ask(backend, IdKey::Str(id), line, wait).await.ok()?;
        let mut value: Value = serde_json::from_slice(&answer).ok()?;
        value.get_mut("result").map(Value::take)
    }
}
