//! Who signs in at the embedded authorization server when no OpenID provider does: the
//! user an authenticating proxy names (`--trusted-user-header`, only from a
//! `--trusted-proxy`) with the groups it says (`--trusted-groups-header`), or `--dev-user`.

use crate::authserver::users::Users;

/// The flags that say how users are known, as given.
pub(super) struct UserFlags<'a> {
    pub trusted_user_header: Option<&'a str>,
    pub trusted_groups_header: Option<&'a str>,
    pub dev_user: Option<&'a str>,
    pub max_user_groups: usize,
}

/// How the user is known without `--login-oidc`: `--trusted-user-header` (only from a
/// `--trusted-proxy`) or `--dev-user`, never both.
pub(super) fn users(args: &UserFlags<'_>, trusted_proxies: bool) -> Result<Users, String> {
    let trusted_user_header = args
        .trusted_user_header
        .map(|name| {
            proxy_header(
                "--trusted-user-header",
                name,
                "X-Forwarded-User",
                trusted_proxies,
            )
        })
        .transpose()?;
    let groups_header = args
        .trusted_groups_header
        .map(|name| {
            proxy_header(
                "--trusted-groups-header",
                name,
                "X-Forwarded-Groups",
                trusted_proxies,
            )
        })
        .transpose()?;
    if groups_header.is_some() && trusted_user_header.is_none() {
        return Err("--trusted-groups-header needs --trusted-user-header: the groups are the signed-in user's, and only the authenticating proxy says who that is".into());
    }
    if groups_header.is_some() && groups_header == trusted_user_header {
        return Err("--trusted-groups-header and --trusted-user-header name the same header: the proxy sends the user and the groups in two, e.g. X-Forwarded-User and X-Forwarded-Groups".into());
    }
    if trusted_user_header.is_some() && args.dev_user.is_some() {
        return Err(
            "--dev-user and --trusted-user-header cannot be used together: every request without the proxy's header (any client that reaches this port directly) would be signed in as the dev user. Use --trusted-user-header behind the authenticating proxy, or --dev-user alone for local testing"
                .into(),
        );
    }
    if let Some(user) = args.dev_user {
        if user.trim().is_empty() || user.chars().any(char::is_control) || user.len() > 256 {
            return Err(
                "--dev-user needs a user name (1 to 256 characters, no control characters)".into(),
            );
        }
        tracing::warn!(
            user = %user,
            "--dev-user signs everyone in as this user: for local testing only, never on a shared host"
        );
    }
    Ok(Users {
        trusted_header: trusted_user_header,
        groups_header,
        max_groups: args.max_user_groups,
        dev_user: args.dev_user.map(str::to_owned),
    })
}

/// A header an authenticating proxy sets (`flag`), lower-cased: a header name, and only
/// with `--trusted-proxy`.
fn proxy_header(
    flag: &str,
    name: &str,
    example: &str,
    trusted_proxies: bool,
) -> Result<String, String> {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if !valid {
        return Err(format!(
            "{flag} '{name}' is not a header name (letters, digits, - and _), e.g. {example}"
        ));
    }
    if !trusted_proxies {
        return Err(format!(
            "{flag} {name} is believed only from the authenticating proxy: add --trusted-proxy with its address, e.g. --trusted-proxy 127.0.0.1/32"
        ));
    }
    Ok(name.to_ascii_lowercase())
}
