//! The OAuth parsers (`oauth::challenge::bearer` for `WWW-Authenticate`, and the RFC 9728
//! and RFC 8414 metadata documents): never panic; a challenge's scopes come from its text;
//! (escapes undone) an accepted authorization server has the issuer it was fetched for and HTTPS (or
//! loopback HTTP) endpoints.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_stdio::oauth::{challenge, metadata};

fuzz_target!(|input: &[u8]| {
    if let Ok(text) = std::str::from_utf8(input) {
        let values: Vec<&str> = text.split('\n').collect();
        if let Some(found) = challenge::bearer(values.iter().copied()) {
            // Quoted values undo `\` escapes: compare with the backslashes gone.
            let plain = text.replace('\\', "");
            for scope in found.scopes() {
                assert!(plain.contains(&scope.replace('\\', "")), "scope {scope:?} is not in the header");
            }
        }
    }
    let _ = metadata::protected_resource(input);
    for matching in [metadata::IssuerMatch::Exact, metadata::IssuerMatch::SameOrigin] {
        if let Ok(server) = metadata::authorization_server(input, "https://as.example.com", matching) {
            if matches!(matching, metadata::IssuerMatch::Exact) {
                assert_eq!(server.issuer, "https://as.example.com");
            }
            for endpoint in [&server.authorization_endpoint, &server.token_endpoint] {
                let loopback = match endpoint.host() {
                    Some(url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
                    Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                    Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                    None => false,
                };
                assert!(endpoint.scheme() == "https" || (endpoint.scheme() == "http" && loopback), "{endpoint}");
                assert!(endpoint.username().is_empty() && endpoint.password().is_none(), "{endpoint}");
            }
        }
    }
});
