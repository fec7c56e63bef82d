//! Reads a `WWW-Authenticate: Bearer …` or `DPoP …` challenge (RFC 6750 §3, RFC 9728 §5.1,
//! RFC 9449 §7.1): where the protected resource metadata is, which scopes the request
//! needs, why it failed, and whether the server wants DPoP-bound tokens.

/// The parts of a Bearer challenge the client acts on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: the URL of the server's protected resource metadata.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, `use_dpop_nonce`, …
    pub error: Option<String>,
    /// The server challenged with the `DPoP` scheme (RFC 9449 §7.1): it takes DPoP-bound
    /// tokens.
    pub dpop: bool,
    /// The server challenged with the `Bearer` scheme: it takes Bearer tokens (and, without
    /// a DPoP challenge beside it, only those).
    pub bearer: bool,
}

impl Challenge {
    /// The challenge's scopes as a list (empty when none were named).
    pub fn scopes(&self) -> Vec<&str> {
        self.scope
            .as_deref()
            .map(|s| s.split_ascii_whitespace().collect())
            .unwrap_or_default()
    }
}

/// Finds the Bearer or DPoP challenge among the header values (a response may carry
/// several `WWW-Authenticate` headers, and one header may list several challenges). A
/// server offering both is read for both: parameters from the first one that names them,
/// and `dpop` set. `None` when there is neither.
pub fn bearer<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    let mut merged: Option<Challenge> = None;
    for found in values.into_iter().flat_map(challenges_in) {
        let into = merged.get_or_insert_with(Challenge::default);
        into.dpop |= found.dpop;
        into.bearer |= found.bearer;
        into.resource_metadata = into.resource_metadata.take().or(found.resource_metadata);
        into.scope = into.scope.take().or(found.scope);
        into.error = into.error.take().or(found.error);
    }
    merged
}

/// Whether any Bearer or DPoP challenge among the header values names `error`. (RFC 9449
/// §9 puts `use_dpop_nonce` in the DPoP challenge; some servers put it in their Bearer one,
/// and a header may list both schemes, so each challenge is read on its own.)
pub fn names_error<'a>(values: impl IntoIterator<Item = &'a str>, error: &str) -> bool {
    values
        .into_iter()
        .flat_map(challenges_in)
        .any(|c| c.error.as_deref() == Some(error))
}

/// The Bearer and DPoP challenges of one header value, in order.
fn challenges_in(header: &str) -> Vec<Challenge> {
    let mut parser = Parser { rest: header };
    let mut all = Vec::new();
    // Parameters belong to the last scheme named; `None` while that scheme is another one.
    let mut current: Option<usize> = None;
    while let Some(item) = parser.next_item() {
        match item {
            Item::Scheme(scheme) => {
                let dpop = scheme.eq_ignore_ascii_case("dpop");
                let bearer = scheme.eq_ignore_ascii_case("bearer");
                current = (dpop || bearer).then(|| {
                    all.push(Challenge {
                        dpop,
                        bearer,
                        ..Challenge::default()
                    });
                    all.len() - 1
                });
            }
            Item::Param(name, value) => {
                if let Some(challenge) = current.and_then(|i| all.get_mut(i)) {
                    let slot = match name.to_ascii_lowercase().as_str() {
                        "resource_metadata" => &mut challenge.resource_metadata,
                        "scope" => &mut challenge.scope,
                        "error" => &mut challenge.error,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
            }
        }
    }
    all
}

enum Item<'a> {
    Scheme(&'a str),
    Param(&'a str, String),
}

/// A tolerant tokenizer for `scheme param=value, param="quoted \" value", scheme2 …`.
struct Parser<'a> {
    rest: &'a str,
}

impl<'a> Parser<'a> {
    fn next_item(&mut self) -> Option<Item<'a>> {
        // One class of separators for skipping and for ending a token: with fewer here
        // than there (a `\r` ends a token but was not skipped), an empty token never moved
        // the parser on, and the loop never ended (found by the `oauth_parsers` fuzz target).
        self.rest = self
            .rest
            .trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        if self.rest.is_empty() {
            return None;
        }
        let end = self
            .rest
            .find(|c: char| c == '=' || c == ',' || c.is_ascii_whitespace())
            .unwrap_or(self.rest.len());
        if end == 0 {
            // A `=` with no name before it: not a token; step over it.
            self.rest = &self.rest[1..];
            return self.next_item();
        }
        let token = &self.rest[..end];
        let after = self.rest[end..].trim_start_matches(|c: char| c.is_ascii_whitespace());
        // `token=` is a parameter, unless it is the `=` padding of a token68.
        if let Some(value_part) = after.strip_prefix('=')
            && !value_part.starts_with('=')
        {
            let value_part = value_part.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let (value, rest) = match value_part.strip_prefix('"') {
                Some(quoted) => read_quoted(quoted),
                None => {
                    let end = value_part.find(',').unwrap_or(value_part.len());
                    (value_part[..end].trim().to_owned(), &value_part[end..])
                }
            };
            self.rest = rest;
            return Some(Item::Param(token, value));
        }
        self.rest = &self.rest[end..];
        Some(Item::Scheme(token))
    }
}

/// Reads a quoted string's content (after the opening quote), undoing `\` escapes.
fn read_quoted(input: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = input.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            '"' => return (value, &input[i + 1..]),
            _ => value.push(c),
        }
    }
    (value, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_ends_even_with_odd_whitespace_or_a_bare_equals_sign() {
        // Fuzz finds (`fuzz/regressions/oauth_parsers/`): each looped forever.
        for header in [
            "\r,$",
            "\x0c",
            "\n\n",
            "=",
            "==,=",
            " = x",
            "Bearer \r scope=a",
        ] {
            let _ = bearer([header]);
        }
        let c = bearer(["\x0cBearer\rscope=\x0cfiles:read"]).unwrap();
        assert_eq!(c.scopes(), ["files:read"]);
    }

    #[test]
    fn reads_the_spec_examples() {
        let c = bearer([r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read""#]).unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scopes(), ["files:read"]);
        let c = bearer([r#"Bearer error="insufficient_scope", scope="files:write a:b", resource_metadata="https://x/prm", error_description="File write permission required""#]).unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scopes(), ["files:write", "a:b"]);
    }

    #[test]
    fn finds_bearer_among_other_schemes_and_headers() {
        let c = bearer([
            r#"Basic realm="x""#,
            r#"Digest realm="a, b", nonce="n", Bearer scope="s", error=invalid_token"#,
        ])
        .unwrap();
        assert_eq!(c.scope.as_deref(), Some("s"));
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        let only_bearer_params = bearer([r#"Bearer scope="a", Basic realm="r", scope="b""#]);
        assert_eq!(only_bearer_params.unwrap().scope.as_deref(), Some("a"));
    }

    #[test]
    fn tolerates_case_escapes_and_bare_bearer() {
        let c = bearer([r#"bearer Scope="a \"b\"", RESOURCE_METADATA=https://h/p"#]).unwrap();
        assert_eq!(c.scope.as_deref(), Some(r#"a "b""#));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://h/p"));
        let bare = Challenge {
            bearer: true,
            ..Challenge::default()
        };
        assert_eq!(bearer(["Bearer"]), Some(bare.clone()));
        assert_eq!(bearer([r#"Basic realm="x""#]), None);
        assert_eq!(bearer(["Bearer abc=="]), Some(bare));
    }

    #[test]
    fn reads_dpop_challenges_alone_and_beside_bearer() {
        // RFC 9449 §7.1's example, and a server offering both schemes.
        let c = bearer([r#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#]).unwrap();
        assert!(c.dpop);
        assert_eq!(c.error.as_deref(), Some("use_dpop_nonce"));
        let both = bearer([
            r#"Bearer resource_metadata="https://h/prm""#,
            r#"DPoP algs="ES256 PS256", scope="s""#,
        ])
        .unwrap();
        assert!(both.dpop && both.bearer);
        assert_eq!(both.resource_metadata.as_deref(), Some("https://h/prm"));
        assert_eq!(both.scope.as_deref(), Some("s"));
        assert!(!bearer(["Bearer"]).unwrap().dpop);
        assert!(!c.bearer, "a DPoP challenge alone");
    }

    #[test]
    fn an_error_is_found_in_whichever_challenge_names_it() {
        let combined = [r#"Bearer realm="r", DPoP error="use_dpop_nonce""#];
        assert!(names_error(combined, "use_dpop_nonce"));
        assert!(!names_error(
            [r#"DPoP error="invalid_token""#],
            "use_dpop_nonce"
        ));
        assert!(!names_error(
            [r#"Basic error="use_dpop_nonce""#],
            "use_dpop_nonce"
        ));
    }
}
