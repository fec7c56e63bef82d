//! What the relay remembers of a modern server's tools: which arguments each mirrors into
//! an `Mcp-Param-*` header (its `x-mcp-header` annotations, learned from `tools/list`).
//! The table only; `paths::tool_args` fills it and builds a call's headers from it.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::era::tools::{ParamHeader, filter_list};

#[derive(Default)]
pub struct ToolHeaderTable {
    known: Mutex<HashMap<String, Vec<ParamHeader>>>,
}

impl ToolHeaderTable {
    pub fn learn(&self, kept: Vec<(String, Vec<ParamHeader>)>) {
        let mut known = self.known.lock().expect("tools lock");
        for (name, params) in kept {
            known.insert(name, params);
        }
    }

    pub fn get(&self, name: &str) -> Option<Vec<ParamHeader>> {
        self.known.lock().expect("tools lock").get(name).cloned()
    }

    /// Filters the tools of a `tools/list` result in place (tools with invalid
    /// `x-mcp-header` annotations are dropped, with a warning) and learns the rest.
    /// Returns whether anything was dropped.
    pub fn filter_result(&self, result: &mut Value) -> bool {
        let (kept, dropped) = filter_list(result);
        self.learn(kept);
        for (name, reason) in &dropped {
            tracing::warn!(tool = %name, %reason, "dropped a tool whose x-mcp-header annotation is invalid");
        }
        !dropped.is_empty()
    }

    /// Like [`ToolHeaderTable::filter_result`] on a whole answer line; the line is returned
    /// unchanged (byte for byte) when no tool was dropped.
    pub fn filter_answer(&self, line: Vec<u8>) -> Vec<u8> {
        let Ok(mut answer) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        let Some(result) = answer.get_mut("result") else {
            return line;
        };
        if self.filter_result(result) {
            serde_json::to_vec(&answer).unwrap_or(line)
        } else {
            line
        }
    }
}
