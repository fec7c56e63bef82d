//! What a pooled backend knows of its child's tools' `x-mcp-header` annotations, and
//! whether the child said they changed since (`params` fills it and checks against it).

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::broadcast;

use crate::era::tools::ParamHeader;

/// Annotated parameters by tool name.
pub type AnnotatedParams = HashMap<String, Vec<ParamHeader>>;

/// What a backend knows of its child's tools' annotations.
pub struct ToolCache {
    pub known: Option<AnnotatedParams>,
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
