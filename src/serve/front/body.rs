//! Reading a request's body within `--max-message-size`, and the refusal a front-door
//! check gives instead of going on.

use axum::body::Body;
use bytes::Bytes;
use http::header::CONTENT_LENGTH;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;

use crate::serve::gateway::Gateway;
use crate::serve::inbound::Inbound;
use crate::serve::responses::{header, text, too_large};

/// A refusal: the response the request gets instead (boxed: it is large).
pub type Refusal = Box<Response<Body>>;

/// A request body, read up to `--max-message-size` (chunked ones too).
pub async fn read_body(
    gateway: &Gateway,
    headers: &HeaderMap,
    body: Inbound,
) -> Result<Bytes, Refusal> {
    let max = gateway.config.max_message_size;
    let declared = header(headers, CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Box::new(too_large(max)));
    }
    match http_body_util::Limited::new(body, max).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Box::new(too_large(max))),
        Err(_) => Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "the request body could not be read\n",
        ))),
    }
}
