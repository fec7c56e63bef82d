//! Finds the authorization server for an MCP server: protected resource metadata (the
//! challenge's hint, then the well-known URLs), then that server's own metadata (RFC 8414,
//! then OpenID Connect), and, for a server that publishes none, the 2025-03-26 defaults at
//! its origin; and any issuer's metadata document fetched and checked as a JSON value
//! (`server_metadata`: serve's key sets, `--login-oidc`, the enterprise identity provider).

use url::Url;

use super::challenge::Challenge;
use super::http::OAuthHttp;
use super::metadata::{self, AuthorizationServer, IssuerMatch, ProtectedResource};
use super::wellknown::{self, checked};

/// What discovery found.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The protected resource metadata, when the server publishes it.
    pub resource: Option<ProtectedResource>,
    pub server: AuthorizationServer,
    /// True when nothing was published and the 2025-03-26 defaults are in use.
    pub legacy_defaults: bool,
}

/// Runs discovery for the MCP server at `server`, using what its 401 said.
pub async fn discover(
    http: &OAuthHttp,
    server: &Url,
    challenge: Option<&Challenge>,
) -> Result<Discovered, String> {
    let hint = challenge.and_then(|c| c.resource_metadata.as_deref());
    let (candidates, hint_problem) = wellknown::protected_resource_candidates(server, hint);
    if let Some(problem) = hint_problem {
        tracing::warn!("{problem}; trying the well-known locations instead");
    }
    let Some(resource) = first_protected_resource(http, &candidates).await else {
        return legacy(http, server).await;
    };
    if let Some(named) = &resource.resource
        && !covers(named, server)
    {
        return Err(format!(
            "the protected resource metadata is for {named}, not for {}; no credentials are sent to a server that claims another resource (RFC 9728 §3.3)",
            server.origin().ascii_serialization()
        ));
    }
    let mut problems = Vec::new();
    for issuer in &resource.authorization_servers {
        match authorization_server(http, issuer, IssuerMatch::Exact).await {
            Ok(server) => {
                return Ok(Discovered {
                    resource: Some(resource),
                    server,
                    legacy_defaults: false,
                });
            }
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        problems.push("the protected resource metadata lists no authorization_servers".into());
    }
    Err(format!(
        "no usable authorization server for {}: {}",
        server.origin().ascii_serialization(),
        problems.join("; ")
    ))
}

/// The server's protected resource metadata alone (no authorization server lookups):
/// what a 401 is checked against, to notice the server moved to another authorization
/// server.
pub async fn protected_resource(
    http: &OAuthHttp,
    server: &Url,
    challenge: Option<&Challenge>,
) -> Option<ProtectedResource> {
    let hint = challenge.and_then(|c| c.resource_metadata.as_deref());
    let (candidates, _) = wellknown::protected_resource_candidates(server, hint);
    first_protected_resource(http, &candidates).await
}

async fn first_protected_resource(
    http: &OAuthHttp,
    candidates: &[Url],
) -> Option<ProtectedResource> {
    for url in candidates {
        match http.get_json(url).await {
            Ok(fetched) if fetched.status.is_success() => {
                match metadata::protected_resource(&fetched.body) {
                    Ok(resource) => return Some(resource),
                    Err(e) => tracing::debug!(url = %url.path(), "{e}"),
                }
            }
            Ok(fetched) => {
                tracing::debug!(url = %url.path(), status = %fetched.status, "no protected resource metadata here")
            }
            Err(e) => tracing::debug!(url = %url.path(), "{e}"),
        }
    }
    None
}

/// Whether the resource a server's metadata names is this server: the same origin, and a
/// path that is the server's path or a parent of it (what the TypeScript SDK accepts).
fn covers(named: &str, server: &Url) -> bool {
    let Ok(named) = Url::parse(named) else {
        return false;
    };
    if named.origin() != server.origin() {
        return false;
    }
    let parent = named.path().trim_end_matches('/');
    let path = server.path().trim_end_matches('/');
    path == parent || path.starts_with(&format!("{parent}/"))
}

/// Fetches and checks one authorization server's metadata, trying each well-known form.
async fn authorization_server(
    http: &OAuthHttp,
    issuer: &str,
    matching: IssuerMatch,
) -> Result<AuthorizationServer, String> {
    let issuer_url = checked(issuer, "the authorization server")?;
    let mut last = format!("{issuer}: no metadata at any well-known location");
    for url in wellknown::authorization_server_candidates(&issuer_url) {
        match http.get_json(&url).await {
            Ok(fetched) if fetched.status.is_success() => {
                match metadata::authorization_server(&fetched.body, issuer, matching) {
                    Ok(server) => return Ok(server),
                    // A document that fails the checks must not be used; another form may
                    // still be valid, but its problem is the one worth reporting.
                    Err(e) => last = format!("{issuer}: {e}"),
                }
            }
            Ok(_) => {}
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A 2025-03-26 server: the authorization server is the MCP server's origin, with its
/// RFC 8414 metadata if it has any, else the fixed default paths.
async fn legacy(http: &OAuthHttp, server: &Url) -> Result<Discovered, String> {
    let defaults = wellknown::legacy_endpoints(server);
    let issuer = defaults.issuer.as_str().trim_end_matches('/').to_owned();
    if let Ok(found) = authorization_server(http, &issuer, IssuerMatch::SameOrigin).await {
        return Ok(Discovered {
            resource: None,
            server: found,
            legacy_defaults: false,
        });
    }
    checked(defaults.token.as_str(), "the server's origin")?;
    tracing::info!(
        "the server publishes no OAuth metadata; using the 2025-03-26 default endpoints at its origin"
    );
    Ok(Discovered {
        resource: None,
        server: AuthorizationServer {
            issuer,
            authorization_endpoint: defaults.authorization,
            token_endpoint: defaults.token,
            registration_endpoint: Some(defaults.registration),
            device_authorization_endpoint: None,
            revocation_endpoint: None,
            token_endpoint_auth_methods: vec!["none".into(), "client_secret_post".into()],
            scopes_supported: None,
            grant_types_supported: None,
            iss_parameter_supported: false,
            client_id_metadata_documents: false,
            dpop_algs: Vec::new(),
        },
        legacy_defaults: true,
    })
}

/// An authorization server's metadata document (RFC 8414, then OpenID Connect discovery),
/// whose `issuer` must be exactly `issuer` (`flag` names where that came from, for the
/// error).
pub async fn server_metadata(
    http: &OAuthHttp,
    issuer: &Url,
    flag: &str,
) -> Result<serde_json::Value, String> {
    let mut problems = Vec::new();
    for candidate in wellknown::authorization_server_candidates(issuer) {
        let fetched = match http.get_json(&candidate).await {
            Ok(fetched) if fetched.status.is_success() => fetched,
            Ok(fetched) => {
                problems.push(format!("{}: HTTP {}", candidate.path(), fetched.status));
                continue;
            }
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let metadata: serde_json::Value = serde_json::from_slice(&fetched.body)
            .map_err(|e| format!("the authorization server metadata is not JSON ({e})"))?;
        let named = metadata["issuer"].as_str().unwrap_or_default();
        if named != issuer.as_str() && named != issuer.as_str().trim_end_matches('/') {
            return Err(format!(
                "the authorization server metadata names issuer {named:?}, not {:?} ({flag})",
                issuer.as_str()
            ));
        }
        return Ok(metadata);
    }
    Err(format!(
        "no authorization server metadata for {flag} {issuer} ({})",
        problems.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use axum::http::{StatusCode, Uri};
    use serde_json::{Value, json};

    use super::*;
    use crate::http::client::ClientOptions;

    /// A fake metadata host: path (with query) -> (status, JSON). Everything else is 404.
    async fn host(pages: impl FnOnce(&str) -> Vec<(&'static str, u16, Value)>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let table: HashMap<String, (u16, String)> = pages(&base)
            .into_iter()
            .map(|(path, status, body)| (path.to_owned(), (status, body.to_string())))
            .collect();
        let table = Arc::new(table);
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let table = table.clone();
            async move {
                let key = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
                match table.get(&key) {
                    Some((status, body)) => (
                        StatusCode::from_u16(*status).unwrap(),
                        [
                            ("location", "/elsewhere"),
                            ("content-type", "application/json"),
                        ],
                        body.clone(),
                    ),
                    None => (
                        StatusCode::NOT_FOUND,
                        [("location", ""), ("content-type", "text/plain")],
                        String::new(),
                    ),
                }
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        base
    }

    fn http() -> OAuthHttp {
        OAuthHttp::new(
            ClientOptions {
                connect_timeout: std::time::Duration::from_secs(5),
                read_timeout: Some(std::time::Duration::from_secs(5)),
                extra_roots: Vec::new(),
            },
            1 << 20,
        )
    }

    fn as_doc(issuer: &str) -> Value {
        json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
            "code_challenge_methods_supported": ["S256"],
        })
    }

    #[tokio::test]
    async fn the_challenge_hint_leads_to_a_path_inserted_rfc_8414_document() {
        let base = host(|base| {
            vec![
                ("/custom-prm", 200, json!({"resource": format!("{base}/mcp"), "authorization_servers": [format!("{base}/tenant1")]})),
                ("/.well-known/oauth-authorization-server/tenant1", 200, as_doc(&format!("{base}/tenant1"))),
            ]
        })
        .await;
        let challenge = Challenge {
            resource_metadata: Some(format!("{base}/custom-prm")),
            ..Challenge::default()
        };
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let found = discover(&http(), &server, Some(&challenge)).await.unwrap();
        assert_eq!(found.server.issuer, format!("{base}/tenant1"));
        assert_eq!(
            found.server.token_endpoint.as_str(),
            format!("{base}/tenant1/token")
        );
        assert!(!found.legacy_defaults);
    }

    #[tokio::test]
    async fn the_root_document_and_the_appended_oidc_form_are_the_last_resorts() {
        let base = host(|base| {
            vec![
                (
                    "/.well-known/oauth-protected-resource",
                    200,
                    json!({"authorization_servers": [format!("{base}/t2")]}),
                ),
                (
                    "/t2/.well-known/openid-configuration",
                    200,
                    as_doc(&format!("{base}/t2")),
                ),
            ]
        })
        .await;
        let server = Url::parse(&format!("{base}/api/mcp?x=1")).unwrap();
        let found = discover(&http(), &server, None).await.unwrap();
        assert_eq!(found.server.issuer, format!("{base}/t2"));
    }

    #[tokio::test]
    async fn the_path_inserted_document_keeps_the_query() {
        let base = host(|base| {
            vec![
                (
                    "/.well-known/oauth-protected-resource/mcp?tenant=7",
                    200,
                    json!({"authorization_servers": [base]}),
                ),
                ("/.well-known/oauth-authorization-server", 200, as_doc(base)),
            ]
        })
        .await;
        let server = Url::parse(&format!("{base}/mcp?tenant=7")).unwrap();
        let found = discover(&http(), &server, None).await.unwrap();
        assert_eq!(found.server.issuer, base);
    }

    #[tokio::test]
    async fn metadata_for_another_issuer_is_not_used() {
        let base = host(|base| {
            vec![
                (
                    "/.well-known/oauth-protected-resource",
                    200,
                    json!({"authorization_servers": [base]}),
                ),
                (
                    "/.well-known/oauth-authorization-server",
                    200,
                    as_doc("https://evil.example.com"),
                ),
            ]
        })
        .await;
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let e = discover(&http(), &server, None).await.unwrap_err();
        assert!(e.contains("mix-up"), "{e}");
    }

    #[tokio::test]
    async fn metadata_for_another_resource_stops_discovery() {
        let base = host(|base| {
            vec![
                ("/.well-known/oauth-protected-resource/mcp", 200, json!({"resource": "https://elsewhere.example/mcp", "authorization_servers": [base]})),
                ("/.well-known/oauth-authorization-server", 200, as_doc(base)),
            ]
        })
        .await;
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let e = discover(&http(), &server, None).await.unwrap_err();
        assert!(e.contains("RFC 9728"), "{e}");
    }

    #[test]
    fn a_resource_covers_its_own_path_and_below() {
        let server = Url::parse("https://h/api/mcp").unwrap();
        assert!(covers("https://h/api/mcp/", &server));
        assert!(covers("https://h/api", &server));
        assert!(covers("https://h", &server));
        assert!(!covers("https://h/ap", &server));
        assert!(!covers("https://h:8443/api/mcp", &server));
        assert!(!covers("not a url", &server));
    }

    #[tokio::test]
    async fn a_server_without_metadata_gets_the_2025_03_26_defaults() {
        let base = host(|_| vec![]).await;
        let server = Url::parse(&format!("{base}/v1/mcp")).unwrap();
        let found = discover(&http(), &server, None).await.unwrap();
        assert!(found.legacy_defaults);
        assert_eq!(
            found.server.authorization_endpoint.as_str(),
            format!("{base}/authorize")
        );
        assert_eq!(
            found.server.token_endpoint.as_str(),
            format!("{base}/token")
        );
    }

    #[tokio::test]
    async fn a_redirect_is_never_followed() {
        // The PRM location answers 307 to a valid document: discovery must not go there.
        let base = host(|base| {
            vec![
                ("/.well-known/oauth-protected-resource/mcp", 307, json!({})),
                ("/elsewhere", 200, json!({"authorization_servers": [base]})),
            ]
        })
        .await;
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let found = discover(&http(), &server, None).await.unwrap();
        assert!(found.legacy_defaults, "the redirect target was fetched");
    }
}
