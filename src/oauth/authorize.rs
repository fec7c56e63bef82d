//! The authorization request URL, and the checks on what comes back to the redirect URI:
//! `state` first (in constant time), then RFC 9207's `iss`, then the code or the error.

use url::Url;

use crate::secret::Secret;
use crate::secret::matches;

/// What goes into the authorization URL.
pub struct AuthorizationRequest<'a> {
    pub endpoint: &'a Url,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub state: &'a Secret,
    pub code_challenge: &'a str,
    /// RFC 8707 `resource` (omitted with `--no-resource-indicator`).
    pub resource: Option<&'a str>,
    /// Space-separated scopes; omitted when empty.
    pub scope: Option<&'a str>,
}

/// The URL to send the user to. Query parameters already on the endpoint are kept; PKCE is
/// always S256; `prompt` is never sent (it would force a consent screen on every login).
pub fn authorization_url(request: &AuthorizationRequest<'_>) -> Url {
    let mut url = request.endpoint.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", request.client_id)
            .append_pair("redirect_uri", request.redirect_uri)
            .append_pair("state", request.state.expose())
            .append_pair("code_challenge", request.code_challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(resource) = request.resource {
            query.append_pair("resource", resource);
        }
        if let Some(scope) = request.scope.filter(|s| !s.trim().is_empty()) {
            query.append_pair("scope", scope);
        }
    }
    url
}

/// What the authorization server must have said, from our side of the flow.
pub struct Expected<'a> {
    pub state: &'a Secret,
    pub issuer: &'a str,
    /// The metadata's `authorization_response_iss_parameter_supported`.
    pub iss_required: bool,
}

/// Checks the redirect's query and returns the authorization code. Nothing the server
/// sent is echoed unless `state` and `iss` proved it is our server answering our request,
/// and even then only a sanitized error code.
pub fn code_from_callback(query: &str, expected: &Expected<'_>) -> Result<Secret, String> {
    let mut state = None;
    let mut iss = None;
    let mut code = None;
    let mut error = None;
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match name.as_ref() {
            "state" => &mut state,
            "iss" => &mut iss,
            "code" => &mut code,
            "error" => &mut error,
            _ => continue,
        };
        if slot.is_some() {
            return Err("the authorization response repeats a parameter; it is refused".into());
        }
        *slot = Some(value.into_owned());
    }
    if !state.is_some_and(|s| matches(&s, expected.state)) {
        return Err(
            "the authorization response does not carry this login's state; it is refused (start the login again)".into(),
        );
    }
    match &iss {
        Some(iss) if iss != expected.issuer => {
            return Err(
                "the authorization response names another authorization server (iss); it is refused (mix-up protection)".into(),
            );
        }
        None if expected.iss_required => {
            return Err(
                "the authorization server promises an iss parameter but sent none; the response is refused".into(),
            );
        }
        _ => {}
    }
    if let Some(error) = error {
        return Err(format!(
            "the authorization server refused the login: {}",
            sanitized(&error)
        ));
    }
    code.filter(|c| !c.is_empty())
        .map(Secret::new)
        .ok_or_else(|| "the authorization response carries no code".into())
}

/// An error code from a server, reduced to what is safe to show: RFC 6749's error
/// characters only, at most 64 of them.
pub fn sanitized(raw: &str) -> String {
    let clean: String = raw
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .take(64)
        .collect();
    if clean.is_empty() {
        "an unnamed error".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(state: &Secret, iss_required: bool) -> Expected<'_> {
        Expected {
            state,
            issuer: "https://as.example.com",
            iss_required,
        }
    }

    #[test]
    fn the_url_has_pkce_resource_and_keeps_existing_parameters() {
        let endpoint = Url::parse("https://as.example.com/authorize?tenant=7").unwrap();
        let state = Secret::new("st");
        let url = authorization_url(&AuthorizationRequest {
            endpoint: &endpoint,
            client_id: "c 1",
            redirect_uri: "http://127.0.0.1:5555/callback",
            state: &state,
            code_challenge: "ch",
            resource: Some("https://mcp.example.com/mcp"),
            scope: Some(""),
        });
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("tenant"), Some("7"));
        assert_eq!(get("response_type"), Some("code"));
        assert_eq!(get("client_id"), Some("c 1"));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("resource"), Some("https://mcp.example.com/mcp"));
        assert_eq!(get("scope"), None, "an empty scope is omitted");
        assert_eq!(get("prompt"), None);
    }

    #[test]
    fn a_good_callback_yields_the_code() {
        let state = Secret::new("st");
        let code = code_from_callback(
            "code=abc&state=st&iss=https%3A%2F%2Fas.example.com",
            &expected(&state, true),
        )
        .unwrap();
        assert_eq!(code.expose(), "abc");
        assert!(code_from_callback("code=abc&state=st", &expected(&state, false)).is_ok());
    }

    #[test]
    fn wrong_state_or_issuer_is_refused_without_echoing_the_server() {
        let state = Secret::new("st");
        for (query, iss_required, why) in [
            ("code=abc&state=other", false, "state"),
            ("code=abc", false, "state"),
            ("code=abc&state=st&iss=https%3A%2F%2Fevil", false, "mix-up"),
            ("code=abc&state=st", true, "sent none"),
            (
                "error=access_denied%3Cscript%3E&state=st&iss=https%3A%2F%2Fevil",
                false,
                "mix-up",
            ),
            ("code=a&code=b&state=st", false, "repeats"),
        ] {
            let e = code_from_callback(query, &expected(&state, iss_required)).unwrap_err();
            assert!(e.contains(why), "{query}: {e}");
            assert!(!e.contains("script"), "{e}");
        }
        let e = code_from_callback(
            "error=access_denied%3Cb%3E&state=st",
            &expected(&state, false),
        )
        .unwrap_err();
        assert!(e.ends_with("access_deniedb"), "{e}");
    }
}
