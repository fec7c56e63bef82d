//! What is kept of a client, registered here (RFC 7591) or described by a metadata
//! document at its id.

/// What is kept of a client: where it may be sent back to, and the name it gave.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ClientRecord {
    pub redirect_uris: Vec<String>,
    #[serde(default)]
    pub client_name: Option<String>,
}
