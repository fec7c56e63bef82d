//! Where OAuth metadata lives (RFC 9728 and RFC 8414 path insertion, OpenID Connect
//! Discovery), and which URLs from a server or an authorization server may be used at all.

use std::net::IpAddr;

use url::{Host, Url};

const PRM: &str = "/.well-known/oauth-protected-resource";
const OAUTH_AS: &str = "/.well-known/oauth-authorization-server";
const OPENID: &str = "/.well-known/openid-configuration";

/// Checks a URL that came from a server or an authorization server before we fetch it or
/// send a user to it: http(s) with a host, https unless the host is loopback, and no
/// userinfo (which could smuggle credentials or disguise the host). `what` names the URL
/// in the error.
pub fn checked(raw: &str, what: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("{what} is not a valid URL ({e})"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host().is_none() {
        return Err(format!("{what} is not an http(s) URL with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{what} carries a user name or password, which is refused"
        ));
    }
    if url.scheme() == "http" && !is_loopback(&url) {
        return Err(format!(
            "{what} is plain http on a non-loopback host; OAuth endpoints must use https"
        ));
    }
    Ok(url)
}

/// Whether the URL's host is this machine (127.0.0.0/8, ::1 or `localhost`).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The protected resource metadata URLs to try for `server`, in order: the challenge's
/// `resource_metadata` hint (when usable), the path-inserted well-known URL (query kept),
/// then the one at the host root. Returns the unusable hint's problem too, for a warning.
pub fn protected_resource_candidates(
    server: &Url,
    hint: Option<&str>,
) -> (Vec<Url>, Option<String>) {
    let mut candidates = Vec::new();
    let mut problem = None;
    if let Some(hint) = hint {
        match checked(hint, "the resource_metadata URL in WWW-Authenticate") {
            Ok(url) => candidates.push(url),
            Err(e) => problem = Some(e),
        }
    }
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        let mut inserted = at_origin(server, &format!("{PRM}{path}"));
        inserted.set_query(server.query());
        candidates.push(inserted);
    }
    candidates.push(at_origin(server, PRM));
    candidates.dedup();
    (candidates, problem)
}

/// The authorization server metadata URLs for `issuer`, in the order MCP prescribes: RFC
/// 8414 path insertion, then OpenID Connect with the path inserted, then appended.
pub fn authorization_server_candidates(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![at_origin(issuer, OAUTH_AS), at_origin(issuer, OPENID)];
    }
    vec![
        at_origin(issuer, &format!("{OAUTH_AS}{path}")),
        at_origin(issuer, &format!("{OPENID}{path}")),
        at_origin(issuer, &format!("{path}{OPENID}")),
    ]
}

/// The 2025-03-26 defaults, for a server without any metadata: the authorization server
/// is the MCP server's origin, with fixed endpoint paths.
pub struct LegacyEndpoints {
    pub issuer: Url,
    pub authorization: Url,
    pub token: Url,
    pub registration: Url,
}

pub fn legacy_endpoints(server: &Url) -> LegacyEndpoints {
    LegacyEndpoints {
        issuer: at_origin(server, "/"),
        authorization: at_origin(server, "/authorize"),
        token: at_origin(server, "/token"),
        registration: at_origin(server, "/register"),
    }
}

/// `url`'s scheme, host and port with `path`, no query or fragment.
fn at_origin(url: &Url, path: &str) -> Url {
    let mut at = url.clone();
    at.set_path(path);
    at.set_query(None);
    at.set_fragment(None);
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn strings(urls: &[Url]) -> Vec<&str> {
        urls.iter().map(Url::as_str).collect()
    }

    #[test]
    fn protected_resource_urls_in_order_with_the_query_kept() {
        let (candidates, problem) = protected_resource_candidates(
            &url("https://mcp.example.com/public/mcp?tenant=7"),
            Some("https://mcp.example.com/prm"),
        );
        assert_eq!(problem, None);
        assert_eq!(
            strings(&candidates),
            [
                "https://mcp.example.com/prm",
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp?tenant=7",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        let (root_only, _) = protected_resource_candidates(&url("https://h/"), None);
        assert_eq!(
            strings(&root_only),
            ["https://h/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn an_unusable_hint_is_skipped_and_reported() {
        let (candidates, problem) =
            protected_resource_candidates(&url("https://h/mcp"), Some("http://evil.example/prm"));
        assert_eq!(candidates.len(), 2);
        assert!(problem.unwrap().contains("must use https"));
    }

    #[test]
    fn authorization_server_urls_follow_rfc_8414_then_oidc() {
        assert_eq!(
            strings(&authorization_server_candidates(&url(
                "https://auth.example.com/tenant1"
            ))),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            strings(&authorization_server_candidates(&url(
                "https://auth.example.com/"
            ))),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn only_https_or_loopback_urls_without_userinfo_pass() {
        assert!(checked("https://as.example.com/token", "t").is_ok());
        assert!(checked("http://127.0.0.1:8080/token", "t").is_ok());
        assert!(checked("http://localhost/token", "t").is_ok());
        assert!(checked("http://[::1]/token", "t").is_ok());
        assert!(checked("http://as.example.com/token", "t").is_err());
        assert!(checked("https://user:pw@as.example.com/token", "t").is_err());
        assert!(checked("javascript:alert(1)", "t").is_err());
        assert!(checked("file:///etc/passwd", "t").is_err());
    }

    #[test]
    fn legacy_endpoints_sit_at_the_servers_origin() {
        let legacy = legacy_endpoints(&url("https://h:8443/v1/mcp?x=1"));
        assert_eq!(legacy.authorization.as_str(), "https://h:8443/authorize");
        assert_eq!(legacy.token.as_str(), "https://h:8443/token");
        assert_eq!(legacy.registration.as_str(), "https://h:8443/register");
    }
}
