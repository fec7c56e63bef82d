//! Who the user at `/authorize` is. The embedded server has no passwords of its own: an
//! authenticating proxy in front says who (`--trusted-user-header`, believed only from a
//! `--trusted-proxy` address, and only when it says it exactly once), or `--dev-user` names
//! one for local use (never together with a proxy header: startup refuses the pair).

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

/// Why nobody is signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoUser {
    /// No user is known: the client is told (`access_denied`), and the words say what to
    /// set up.
    Absent(String),
    /// The proxy's header names more than one user (repeated, or a list): refused outright
    /// (400), never guessed. A proxy that appends the header instead of replacing it would
    /// otherwise let a client put its own name first.
    Ambiguous(String),
}

impl Users {
    /// The signed-in user, or why there is none (shown to the user, so it says what to set
    /// up).
    pub fn who(&self, headers: &HeaderMap, trusted_peer: bool) -> Result<String, NoUser> {
        if let Some(name) = &self.trusted_header {
            let mut values = headers.get_all(name.as_str()).iter();
            match values.next().map(|v| v.to_str()) {
                Some(_) if !trusted_peer => {
                    tracing::warn!(header = %name, "a user header came from an address that is not a --trusted-proxy; ignored");
                }
                Some(first) => {
                    let count = 1 + values.count();
                    if count > 1 {
                        tracing::warn!(header = %name, count, outcome = "ambiguous_user", "the trusted user header came more than once; refused");
                        return Err(NoUser::Ambiguous(format!(
                            "the {name} header came {count} times: the authenticating proxy must set it once, replacing any the client sent"
                        )));
                    }
                    let user = first.ok().map(str::trim).unwrap_or_default();
                    if user.contains(',') {
                        tracing::warn!(header = %name, outcome = "ambiguous_user", "the trusted user header holds a list; refused");
                        return Err(NoUser::Ambiguous(format!(
                            "the {name} header holds a list (a comma): it must name exactly one user; the authenticating proxy must replace the header, not append to it"
                        )));
                    }
                    if user.is_empty()
                        || user.chars().count() > MAX_USER
                        || user.chars().any(char::is_control)
                    {
                        return Err(NoUser::Absent(format!(
                            "the {name} header does not hold a usable user name (1 to {MAX_USER} characters, no control characters)"
                        )));
                    }
                    return Ok(user.to_owned());
                }
                None => {}
            }
        }
        if let Some(user) = &self.dev_user {
            return Ok(user.clone());
        }
        Err(NoUser::Absent(match &self.trusted_header {
            Some(name) => format!(
                "no signed-in user: the authenticating proxy in front of this server must set {name} (and its address must be a --trusted-proxy)"
            ),
            None => "no way to sign users in is configured: start serve with --trusted-user-header behind an authenticating proxy, or --dev-user NAME for local testing".into(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy() -> Users {
        Users {
            trusted_header: Some("x-forwarded-user".into()),
            dev_user: None,
        }
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append("x-forwarded-user", value.parse().unwrap());
        }
        map
    }

    #[test]
    fn one_value_from_the_proxy_is_the_user() {
        assert_eq!(proxy().who(&headers(&[" bob "]), true), Ok("bob".into()));
    }

    #[test]
    fn a_repeated_or_listed_header_names_nobody() {
        for values in [&["admin", "bob"][..], &["admin, bob"], &["bob,"]] {
            assert!(
                matches!(
                    proxy().who(&headers(values), true),
                    Err(NoUser::Ambiguous(_))
                ),
                "{values:?}"
            );
        }
    }

    #[test]
    fn an_untrusted_peer_is_not_believed_however_it_writes_the_header() {
        for values in [&["admin"][..], &["admin", "bob"]] {
            assert!(
                matches!(proxy().who(&headers(values), false), Err(NoUser::Absent(_))),
                "{values:?}"
            );
        }
    }
}
