//! Who the authorization server is, as clients see it: the issuer identifier and the
//! endpoint URLs, from `--public-url` (whose path, less the MCP path, is the issuer's
//! prefix) or else from the request's sanitized `Host`; and the local path of each
//! endpoint, with or without the prefix (a proxy may strip it).

use url::Url;

#[derive(Debug, Clone)]
pub struct Issuer {
    /// `scheme://host[:port]` as clients reach us.
    origin: String,
    /// The issuer's path, without a trailing `/` ("" at the root).
    prefix: String,
    /// The MCP endpoint's path under the origin.
    resource_path: String,
}

impl Issuer {
    /// From `--public-url` (the MCP endpoint as clients reach it) and `--path`.
    pub fn from_public_url(public_url: &Url, mcp_path: &str) -> Self {
        let origin = public_url.origin().ascii_serialization();
        let path = public_url.path().trim_end_matches('/');
        let prefix = if path.len() >= mcp_path.len()
            && path[path.len() - mcp_path.len()..].eq_ignore_ascii_case(mcp_path)
        {
            &path[..path.len() - mcp_path.len()]
        } else {
            ""
        };
        Issuer {
            origin,
            prefix: prefix.trim_end_matches('/').to_owned(),
            resource_path: path.to_owned(),
        }
    }

    /// From the request: `base` is `scheme://host` already sanitized by the front door.
    pub fn from_request(base: &str, mcp_path: &str) -> Self {
        Issuer {
            origin: base.trim_end_matches('/').to_owned(),
            prefix: String::new(),
            resource_path: mcp_path.to_owned(),
        }
    }

    pub fn identifier(&self) -> String {
        format!("{}{}", self.origin, self.prefix)
    }

    pub fn is_https(&self) -> bool {
        self.origin.starts_with("https://")
    }

    /// The MCP endpoint: the resource (RFC 8707) tokens are for.
    pub fn resource(&self) -> String {
        format!("{}{}", self.origin, self.resource_path)
    }

    /// Another endpoint of the same listener as a resource: `path` under the issuer's
    /// prefix (`serve --config`, where one authorization server issues tokens for every
    /// server of the file).
    pub fn resource_at(&self, path: &str) -> String {
        format!("{}{}{}", self.origin, self.prefix, path)
    }

    pub fn endpoint(&self, name: &str) -> String {
        format!("{}{}/{name}", self.origin, self.prefix)
    }

    /// The endpoint a local request path names (`authorize`, `token`, …), if any:
    /// `/authorize` or `{prefix}/authorize`.
    pub fn local_endpoint<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = if !self.prefix.is_empty() && path.starts_with(&self.prefix) {
            &path[self.prefix.len()..]
        } else {
            path
        };
        rest.strip_prefix('/').filter(|name| !name.contains('/'))
    }
}

/// The path (under the issuer's prefix) of the resource a `serve --config` grant has when
/// the client named none: every endpoint of the listener.
pub const EVERY_ENDPOINT: &str = "/*";

/// For a grant to every endpoint of a listener (`…/*`), the `scheme://host[:port][prefix]`
/// its endpoints' paths go under.
pub fn every_endpoint_base(granted: &str) -> Option<&str> {
    granted.strip_suffix(EVERY_ENDPOINT)
}

/// Whether `presented` is under a grant to every endpoint of a listener: the token
/// endpoint lets a client name one of them (the grant stays as it was; the MCP request
/// is checked against the listener's endpoints).
pub fn within_every_endpoint(granted: &str, presented: &str) -> bool {
    every_endpoint_base(granted).is_some_and(|base| {
        let base = base.to_ascii_lowercase();
        let presented = presented.to_ascii_lowercase();
        presented
            .strip_prefix(&base)
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Whether `presented` names the same resource as `ours` (RFC 8707): scheme and host
/// compared case-insensitively, a trailing `/` ignored.
pub fn same_resource(presented: &str, ours: &str) -> bool {
    let normalize = |raw: &str| {
        Url::parse(raw).ok().map(|u| {
            format!(
                "{}{}{}",
                u.origin().ascii_serialization(),
                u.path().trim_end_matches('/'),
                u.query().map(|q| format!("?{q}")).unwrap_or_default()
            )
        })
    };
    match (normalize(presented), normalize(ours)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_path_is_taken_off_the_public_url_to_make_the_issuer() {
        let url = Url::parse("https://Example.com/team/mcp").unwrap();
        let issuer = Issuer::from_public_url(&url, "/mcp");
        assert_eq!(issuer.identifier(), "https://example.com/team");
        assert_eq!(issuer.endpoint("token"), "https://example.com/team/token");
        assert_eq!(issuer.resource(), "https://example.com/team/mcp");
        assert_eq!(
            issuer.resource_at("/notes/mcp"),
            "https://example.com/team/notes/mcp"
        );
        assert_eq!(issuer.local_endpoint("/team/token"), Some("token"));
        assert_eq!(issuer.local_endpoint("/token"), Some("token"));
        assert_eq!(issuer.local_endpoint("/a/token"), None);
        let root = Issuer::from_public_url(&Url::parse("https://example.com/mcp").unwrap(), "/mcp");
        assert_eq!(root.identifier(), "https://example.com");
    }

    #[test]
    fn a_grant_to_every_endpoint_covers_paths_under_its_origin_only() {
        let every = "http://127.0.0.1:8080/team/*";
        assert_eq!(
            every_endpoint_base(every),
            Some("http://127.0.0.1:8080/team")
        );
        assert!(within_every_endpoint(
            every,
            "http://127.0.0.1:8080/team/a/mcp"
        ));
        assert!(!within_every_endpoint(
            every,
            "http://127.0.0.1:8081/team/a/mcp"
        ));
        assert!(!within_every_endpoint(
            every,
            "http://127.0.0.1:8080/teams/a/mcp"
        ));
        assert!(!within_every_endpoint(
            "http://127.0.0.1:8080/mcp",
            "http://127.0.0.1:8080/mcp"
        ));
    }

    #[test]
    fn resources_compare_by_origin_and_path() {
        assert!(same_resource(
            "http://LOCALHOST:8080/mcp/",
            "http://localhost:8080/mcp"
        ));
        assert!(!same_resource(
            "http://localhost:8081/mcp",
            "http://localhost:8080/mcp"
        ));
        assert!(!same_resource(
            "http://localhost:8080/other",
            "http://localhost:8080/mcp"
        ));
        assert!(!same_resource("not a url", "http://localhost:8080/mcp"));
    }
}
