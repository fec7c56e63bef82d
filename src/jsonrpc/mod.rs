//! The JSON-RPC message model shared by every mode: classification, framing, errors, output.
//!
//! Messages are never re-encoded through `serde_json::Value`: that would change numbers
//! (a 23-digit id becomes a float) and escapes. We borrow what routing needs and forward
//! the original bytes.

pub mod error;
pub mod framing;
pub mod lines;
pub mod message;
pub mod raw_value_token;
pub mod stdio;
pub mod writer;
