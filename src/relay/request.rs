//! A request from the host, owned so the task that serves it can outlive the line buffer.

use bytes::Bytes;

use crate::jsonrpc::message::IdKey;

/// One host request, as dispatch hands it to the path that serves it.
pub struct Call {
    pub id: IdKey,
    /// The id exactly as the host wrote it.
    pub raw_id: String,
    pub method: String,
    pub line: Bytes,
    /// `params` as written in `line` (a slice of it), so the paths need not parse the line
    /// again.
    pub params: Option<Bytes>,
}
