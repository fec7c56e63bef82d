//! The aggregate endpoint's MCP-specific rules, pure and without I/O: how a backend's
//! tools, prompts and resource URIs are named at the one endpoint and traced back, and how
//! clients page through the merged lists.

pub mod catalog;
pub mod cursor;
pub mod handshake;
pub mod ids;
pub mod lists;
pub mod names;
pub mod route;
pub mod uris;
