//! Who the user at `/authorize` is. The embedded server has no passwords of its own: an
//! authenticating proxy in front says who (`--trusted-user-header`, believed only from a
//! `--trusted-proxy` address), or `--dev-user` names one for local use.

use http::HeaderMap;

/// The longest user name accepted from a header.
const MAX_USER: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct Users {
    /// `--trusted-user-header`, lower-cased.
    pub trusted_header: Option<String>,
    /// `--dev-user`.
    pub dev_user: Option<String>,
}

impl Users {
    /// The signed-in user, or why there is none (shown to the user, so it says what to set
    /// up).
    pub fn who(&self, headers: &HeaderMap, trusted_peer: bool) -> Result<String, String> {
        if let Some(name) = &self.trusted_header {
            let value = headers.get(name.as_str()).map(|v| v.to_str());
            match value {
                Some(Ok(user)) if trusted_peer => {
                    let user = user.trim();
                    if user.is_empty()
                        || user.chars().count() > MAX_USER
                        || user.chars().any(char::is_control)
                    {
                        return Err(format!(
                            "the {name} header does not hold a usable user name (1 to {MAX_USER} characters, no control characters)"
                        ));
                    }
                    return Ok(user.to_owned());
                }
                Some(_) if !trusted_peer => {
                    tracing::warn!(header = %name, "a user header came from an address that is not a --trusted-proxy; ignored");
                }
                _ => {}
            }
        }
        if let Some(user) = &self.dev_user {
            return Ok(user.clone());
        }
        Err(match &self.trusted_header {
            Some(name) => format!(
                "no signed-in user: the authenticating proxy in front of this server must set {name} (and its address must be a --trusted-proxy)"
            ),
            None => "no way to sign users in is configured: start serve with --trusted-user-header behind an authenticating proxy, or --dev-user NAME for local testing".into(),
        })
    }
}
