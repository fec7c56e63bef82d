//! A validated authorization request: what the consent page shows, its CSRF token
//! covers, and the code will be bound to.

#[derive(Debug, Clone)]
pub struct Authorization {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    /// The scopes that will be granted (space-separated).
    pub scope: String,
    pub resource: String,
}
