//! HTTP plumbing shared by the transports: client construction, SSE decoding, Retry-After.

pub mod client;
pub mod connect;
pub mod response;
pub mod retry_after;
pub mod sse;
