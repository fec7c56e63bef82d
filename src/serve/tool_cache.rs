//! What a pooled backend knows of its child's tools (their `x-mcp-header` annotations and
//! whether they may run as tasks), and whether the child said they changed since (`params`
//! fills it and checks against it).

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::broadcast;

use crate::era::tasks::TaskSupport;
use crate::era::tools::ParamHeader;

/// Annotated parameters by tool name.
pub type AnnotatedParams = HashMap<String, Vec<ParamHeader>>;

/// What the child's `tools/list` said.
#[derive(Default)]
pub struct KnownTools {
    pub headers: AnnotatedParams,
    /// Tools that may or must run as tasks (the others must not).
    pub task_support: HashMap<String, TaskSupport>,
}

/// What a backend knows of its child's tools.
pub struct ToolCache {
    pub known: Option<KnownTools>,
    /// The child's change notifications: a `tools/list_changed` makes the cache stale.
    changes: broadcast::Receiver<Bytes>,
}

impl ToolCache {
    pub fn new(changes: broadcast::Receiver<Bytes>) -> Self {
        Self {
            known: None,
            changes,
        }
    }

    /// Whether the child said its tools changed since the last look (or said so much that
    /// some of it was missed).
    pub fn stale(&mut self) -> bool {
        let mut stale = self.known.is_none();
        loop {
            match self.changes.try_recv() {
                Ok(line) => {
                    stale |=
                        memchr::memmem::find(&line, b"notifications/tools/list_changed").is_some();
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => stale = true,
                Err(_) => return stale,
            }
        }
    }
}
