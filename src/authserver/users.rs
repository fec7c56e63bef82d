//! Who the user at `/authorize` is. The embedded server has no passwords of its own: an
//! authenticating proxy in front says who (`--trusted-user-header`, believed only from a
//! `--trusted-proxy` address, and only when it says it exactly once), or `--dev-user` names
//! one for local use (never together with a proxy header: startup refuses the pair).
//! The same proxy may say the user's groups (`--trusted-groups-header`), which the grant
//! keeps for the policy (`principal.groups`).

use http::HeaderMap;

/// The longest user name accepted from a header.
const MAX_USER: usize = 256;
/// The most groups one user may be given by the proxy's header by default
/// (`--max-user-groups`), and the longest name of one: past either the sign-in is
/// refused (a grant is stored with them), never cut short.
pub const DEFAULT_MAX_GROUPS: usize = 64;
const MAX_GROUP: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct Users {
    /// `--trusted-user-header`, lower-cased.
    pub trusted_header: Option<String>,
    /// `--trusted-groups-header`, lower-cased: the signed-in user's groups, one header
    /// holding a comma-separated list (as oauth2-proxy's `X-Forwarded-Groups`).
    pub groups_header: Option<String>,
    /// `--max-user-groups`.
    pub max_groups: usize,
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

impl Users {
    /// The signed-in user's groups as the proxy says them (none without
    /// `--trusted-groups-header`, or from a peer that is not a `--trusted-proxy`). Like the
    /// user header it must come once: a repeated header is what a proxy that appends
    /// instead of replacing would let a client add its own groups with.
    pub fn groups(&self, headers: &HeaderMap, trusted_peer: bool) -> Result<Vec<String>, NoUser> {
        let Some(name) = &self.groups_header else {
            return Ok(Vec::new());
        };
        let mut values = headers.get_all(name.as_str()).iter();
        let Some(first) = values.next() else {
            return Ok(Vec::new());
        };
        if !trusted_peer {
            tracing::warn!(header = %name, "a groups header came from an address that is not a --trusted-proxy; ignored");
            return Ok(Vec::new());
        }
        let count = 1 + values.count();
        if count > 1 {
            tracing::warn!(header = %name, count, outcome = "ambiguous_groups", "the trusted groups header came more than once; refused");
            return Err(NoUser::Ambiguous(format!(
                "the {name} header came {count} times: the authenticating proxy must set it once (a comma-separated list), replacing any the client sent"
            )));
        }
        // UTF-8, not only ASCII: group names such as "Équipe" are common.
        let text = std::str::from_utf8(first.as_bytes()).map_err(|_| {
            NoUser::Ambiguous(format!("the {name} header is not text: the authenticating proxy must send the groups as a comma-separated list"))
        })?;
        checked_groups(
            text.split(','),
            self.max_groups,
            &format!("the {name} header"),
        )
        .map_err(NoUser::Ambiguous)
    }
}

/// A signed-in user's groups from `source` (a proxy's header, a provider's claim): trimmed,
/// empty ones skipped, each once; refused whole, never cut short, when one is not a usable
/// name (1 to 256 characters, no control characters) or there are more than `max`
/// (`--max-user-groups`: a grant is stored with them).
pub fn checked_groups<'a>(
    items: impl Iterator<Item = &'a str>,
    max: usize,
    source: &str,
) -> Result<Vec<String>, String> {
    let mut groups: Vec<String> = Vec::new();
    for group in items.map(str::trim).filter(|g| !g.is_empty()) {
        if group.chars().count() > MAX_GROUP || group.chars().any(char::is_control) {
            return Err(format!(
                "{source} holds a group name that is not usable (1 to {MAX_GROUP} characters, no control characters)"
            ));
        }
        if !groups.iter().any(|known| known == group) {
            groups.push(group.to_owned());
        }
    }
    if groups.len() > max {
        return Err(format!(
            "{source} names {} groups; at most {max} (--max-user-groups) are kept with a sign-in: send only the groups this server's policy uses, or ask its operator to raise the bound",
            groups.len()
        ));
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy() -> Users {
        Users {
            trusted_header: Some("x-forwarded-user".into()),
            groups_header: Some("x-forwarded-groups".into()),
            max_groups: DEFAULT_MAX_GROUPS,
            dev_user: None,
        }
    }

    fn groups_headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append("x-forwarded-groups", value.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_proxy_says_the_groups_as_one_comma_separated_list() {
        assert_eq!(
            proxy().groups(&groups_headers(&[" staff, admins ,,staff"]), true),
            Ok(vec!["staff".to_owned(), "admins".to_owned()])
        );
        assert_eq!(proxy().groups(&HeaderMap::new(), true), Ok(Vec::new()));
        let mut utf8 = HeaderMap::new();
        utf8.append(
            "x-forwarded-groups",
            http::HeaderValue::from_bytes("Équipe, staff".as_bytes()).unwrap(),
        );
        assert_eq!(
            proxy().groups(&utf8, true),
            Ok(vec!["Équipe".to_owned(), "staff".to_owned()])
        );
    }

    #[test]
    fn groups_from_an_untrusted_peer_or_without_the_flag_are_none() {
        let headers = groups_headers(&["admins"]);
        assert_eq!(proxy().groups(&headers, false), Ok(Vec::new()));
        let no_flag = Users {
            groups_header: None,
            ..proxy()
        };
        assert_eq!(no_flag.groups(&headers, true), Ok(Vec::new()));
    }

    #[test]
    fn a_repeated_groups_header_too_many_groups_or_a_control_character_is_refused() {
        let many = (0..=DEFAULT_MAX_GROUPS)
            .map(|i| format!("g{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let long = "g".repeat(MAX_GROUP + 1);
        for values in [
            &["staff", "admins"][..],
            &[many.as_str()],
            &[long.as_str()],
            &["staff,ad\tmins"],
        ] {
            assert!(
                matches!(
                    proxy().groups(&groups_headers(values), true),
                    Err(NoUser::Ambiguous(_))
                ),
                "{values:?}"
            );
        }
        let exactly = (0..DEFAULT_MAX_GROUPS)
            .map(|i| format!("g{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            proxy()
                .groups(&groups_headers(&[&exactly]), true)
                .unwrap()
                .len(),
            DEFAULT_MAX_GROUPS
        );
        let fewer = Users {
            max_groups: 2,
            ..proxy()
        };
        assert!(fewer.groups(&groups_headers(&["a,b"]), true).is_ok());
        let why = fewer.groups(&groups_headers(&["a,b,c"]), true).unwrap_err();
        assert!(format!("{why:?}").contains("--max-user-groups"), "{why:?}");
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
