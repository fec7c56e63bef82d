//! Which redirect URIs a client may register and how a requested one is matched: loopback
//! `http` (127.0.0.1, [::1], localhost) with any port (RFC 8252 §7.3: native apps pick a
//! free port at each login), and exact `https` URIs the operator allowed
//! (`--allow-redirect-uri`). Nothing else: a redirect URI is where codes are sent.

use url::Url;

/// Why a redirect URI cannot be registered.
pub fn check_registrable(raw: &str, allowed: &[Url]) -> Result<(), String> {
    let url = Url::parse(raw).map_err(|_| format!("'{raw}' is not an absolute URI"))?;
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "'{raw}': a redirect URI has no fragment and no user name or password"
        ));
    }
    if is_loopback_http(&url) {
        return Ok(());
    }
    if allowed.iter().any(|a| a.as_str() == url.as_str()) {
        return Ok(());
    }
    Err(format!(
        "'{raw}' is not allowed: register a loopback http URI (http://127.0.0.1:PORT/…, any port) or an https URI the operator lists with --allow-redirect-uri"
    ))
}

/// Whether `requested` (from an authorization or token request) is one of `registered`.
pub fn matches(requested: &str, registered: &[String]) -> bool {
    let Ok(requested_url) = Url::parse(requested) else {
        return false;
    };
    registered.iter().any(|r| {
        if r == requested {
            return true;
        }
        let Ok(registered_url) = Url::parse(r) else {
            return false;
        };
        // Loopback: the port may differ, nothing else.
        is_loopback_http(&registered_url)
            && is_loopback_http(&requested_url)
            && registered_url.host_str() == requested_url.host_str()
            && registered_url.path() == requested_url.path()
            && registered_url.query() == requested_url.query()
            && requested_url.fragment().is_none()
            && requested_url.username().is_empty()
            && requested_url.password().is_none()
    })
}

fn is_loopback_http(url: &Url) -> bool {
    url.scheme() == "http" && matches!(url.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registers_with_any_port_and_https_only_when_allowed() {
        let allowed = [Url::parse("https://app.example.com/callback").unwrap()];
        assert!(check_registrable("http://127.0.0.1:4567/callback", &allowed).is_ok());
        assert!(check_registrable("http://localhost/cb", &allowed).is_ok());
        assert!(check_registrable("http://[::1]:9/cb", &allowed).is_ok());
        assert!(check_registrable("https://app.example.com/callback", &allowed).is_ok());
        for bad in [
            "https://evil.example.com/callback",
            "http://127.0.0.1.evil.com/cb",
            "http://10.0.0.1/cb",
            "https://app.example.com/callback#x",
            "http://user@127.0.0.1/cb",
            "javascript:alert(1)",
            "cb",
        ] {
            assert!(check_registrable(bad, &allowed).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_requested_uri_matches_exactly_or_by_loopback_port_only() {
        let registered = vec![
            "http://127.0.0.1:1000/callback".to_owned(),
            "https://app.example.com/cb".to_owned(),
        ];
        assert!(matches("http://127.0.0.1:2000/callback", &registered));
        assert!(matches("https://app.example.com/cb", &registered));
        assert!(!matches("http://127.0.0.1:2000/other", &registered));
        assert!(!matches("http://localhost:1000/callback", &registered));
        assert!(!matches("https://app.example.com/cb?x=1", &registered));
        assert!(!matches("https://app.example.com:444/cb", &registered));
        assert!(!matches("http://127.0.0.1:2000/callback#f", &registered));
    }
}
