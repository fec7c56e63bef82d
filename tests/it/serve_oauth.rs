//! `serve --enable-oauth`: the embedded authorization server end to end over real HTTP —
//! metadata, registration, consent, code and refresh, revocation, scopes, users from a
//! trusted proxy, the bounds, a restart that keeps grants, and no secret in the log.

use serde_json::{Value, json};

use crate::common::serve::*;
use crate::common::signin::*;

/// serve as its own authorization server, `alice` signed in, state in `dir`.
pub async fn start_as(dir: &tempfile::TempDir, extra: &[&str]) -> Serve {
    let store = format!("sqlite:{}", dir.path().join("oauth.db").display());
    // Every test of the embedded authorization server (its attack corpus among them) runs
    // with an audit log, which `no_secret_in_the_audit_log` searches.
    let audit = audit_log(dir).display().to_string();
    let mut flags = vec![
        "--enable-oauth",
        "--oauth-store",
        store.as_str(),
        "--log-level",
        "debug",
        "--audit-log",
        audit.as_str(),
    ];
    if !extra.contains(&"--trusted-user-header") {
        flags.extend(["--dev-user", "alice"]);
    }
    flags.extend_from_slice(extra);
    Serve::start(&flags).await
}

/// Where `start_as` writes the audit log.
pub fn audit_log(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("audit.log")
}

/// Waits until the audit log of `start_as` holds at least one line (the channel is alive),
/// then checks that none of `secrets` is in it.
pub async fn no_secret_in_the_audit_log(dir: &tempfile::TempDir, secrets: &[&str]) {
    let path = audit_log(dir);
    let text = crate::common::eventually("an audit line", async || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|text| text.lines().any(|l| l.contains("\"method\"")))
            .ok_or_else(|| "no line yet".to_owned())
    })
    .await;
    for secret in secrets {
        assert!(!secret.is_empty());
        assert!(!text.contains(secret), "a secret in the audit log: {text}");
    }
}

/// serve behind an authenticating proxy on this machine that names the user in
/// `X-Forwarded-User`.
pub async fn start_behind_proxy(dir: &tempfile::TempDir) -> Serve {
    start_as(
        dir,
        &[
            "--trusted-user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "127.0.0.1/32",
        ],
    )
    .await
}

#[tokio::test]
async fn a_client_signs_in_calls_refreshes_and_revokes() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &[]).await;
    let issuer = format!("http://127.0.0.1:{}", serve.port);

    // The 401 leads to the metadata, which leads to this server.
    let anonymous = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(anonymous.status, 401);
    let prm = serve
        .send("GET", "/.well-known/oauth-protected-resource/mcp", &[], "")
        .await;
    assert_eq!(prm.json()["authorization_servers"], json!([issuer]));
    let metadata = serve
        .send("GET", "/.well-known/oauth-authorization-server", &[], "")
        .await
        .json();
    assert_eq!(metadata["issuer"], json!(issuer));
    assert_eq!(metadata["token_endpoint"], json!(format!("{issuer}/token")));
    assert_eq!(
        metadata["revocation_endpoint"],
        json!(format!("{issuer}/revoke"))
    );
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert!(
        metadata
            .get("authorization_response_iss_parameter_supported")
            .is_none()
    );

    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    let page = serve
        .send("GET", &authorize_path(&client_id, &pkce, &[]), &[], "")
        .await;
    assert_eq!(page.status, 200);
    let policy = page.headers["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    // Chromium applies form-action to the redirect after the POST (WORKAROUNDS.md 41).
    assert!(
        policy.contains("form-action 'self' http://127.0.0.1:7777;"),
        "{policy}"
    );
    assert!(!policy.contains("script-src"), "{policy}");
    assert!(!page.body.contains("<script"), "{}", page.body);
    assert!(
        page.body.contains("test client") && page.body.contains("alice"),
        "{}",
        page.body
    );

    let code = code_for(&serve, &client_id, &pkce, &[]).await;
    let first = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert!(first.access.starts_with("mcpat_"), "{}", first.access);
    assert_eq!(first.body["token_type"], "Bearer");
    assert_eq!(first.body["expires_in"], 3600);
    let session = initialize_as(&serve, &first.access).await;
    assert_eq!(session.status, 200, "{}", session.body);
    serve.wait_stderr("principal=alice").await;

    // Rotation: a new pair; the spent refresh token presented again revokes the grant.
    let second = tokens(&refresh(&serve, &client_id, &first.refresh).await);
    assert_ne!(second.refresh, first.refresh);
    assert_eq!(initialize_as(&serve, &second.access).await.status, 200);
    let reused = refresh(&serve, &client_id, &first.refresh).await;
    assert_eq!(reused.status, 400);
    assert_eq!(reused.json()["error"], "invalid_grant");
    for dead in [&second.access, &first.access] {
        let refused = initialize_as(&serve, dead).await;
        assert_eq!(refused.status, 401, "{}", refused.body);
        assert!(
            refused.headers["www-authenticate"]
                .to_str()
                .unwrap()
                .contains("invalid_token"),
            "{:?}",
            refused.headers
        );
    }
    assert_eq!(
        refresh(&serve, &client_id, &second.refresh).await.status,
        400
    );

    // Sign in again, then revoke (RFC 7009): the refresh token ends the grant.
    let pkce = Pkce::new();
    let code = code_for(&serve, &client_id, &pkce, &[]).await;
    let third = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert_eq!(initialize_as(&serve, &third.access).await.status, 200);
    let revoked = serve
        .send_form(
            "/revoke",
            &[],
            &[("token", &third.refresh), ("client_id", &client_id)],
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(initialize_as(&serve, &third.access).await.status, 401);
    // Unknown tokens are a success too (nothing is learned).
    let unknown = serve
        .send_form(
            "/revoke",
            &[],
            &[("token", "nope"), ("client_id", &client_id)],
        )
        .await;
    assert_eq!(unknown.status, 200);

    // No token, code or verifier reached the log, at debug level.
    let log = serve.stderr();
    assert!(log.contains("token request"), "the log is alive: {log}");
    for secret in [
        &first.access,
        &first.refresh,
        &second.access,
        &second.refresh,
        &third.access,
        &third.refresh,
        &code,
        &pkce.verifier,
    ] {
        assert!(!log.contains(secret.as_str()), "a secret reached the log");
    }
}

#[tokio::test]
async fn a_refresh_token_issued_before_a_restart_works_after_it() {
    let dir = tempfile::tempdir().unwrap();
    // Tokens are for this resource, port included: the restart keeps the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let serve = start_as(&dir, &["--port", &port]).await;
    let (client_id, tokens_before) = sign_in(&serve).await;
    let mut serve = serve;
    serve.child.kill().await.unwrap();
    let serve = start_as(&dir, &["--port", &port]).await;
    assert_eq!(
        initialize_as(&serve, &tokens_before.access).await.status,
        200
    );
    let after = tokens(&refresh(&serve, &client_id, &tokens_before.refresh).await);
    assert_eq!(initialize_as(&serve, &after.access).await.status, 200);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("oauth.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the store is private: {mode:o}");
    }
    // Only hashes are stored: no token value is in the database file.
    let mut stored = std::fs::read(dir.path().join("oauth.db")).unwrap();
    stored.extend(std::fs::read(dir.path().join("oauth.db-wal")).unwrap_or_default());
    let stored = String::from_utf8_lossy(&stored);
    assert!(stored.contains(&client_id), "the store holds the client");
    for secret in [
        &tokens_before.access,
        &tokens_before.refresh,
        &after.access,
        &after.refresh,
    ] {
        assert!(
            !stored.contains(secret.as_str()),
            "a token is stored in the clear"
        );
    }
}

#[tokio::test]
async fn scopes_are_advertised_granted_and_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(
        &dir,
        &["--oauth-scope", "mcp:tools", "--oauth-scope", "mcp:admin"],
    )
    .await;
    let metadata = serve
        .send("GET", "/.well-known/oauth-authorization-server", &[], "")
        .await
        .json();
    assert_eq!(
        metadata["scopes_supported"],
        json!(["mcp:tools", "mcp:admin"])
    );
    let client_id = register(&serve).await;

    // Asking for one of two required scopes: the token works nowhere, 403 says what to ask.
    let pkce = Pkce::new();
    let code = code_for(&serve, &client_id, &pkce, &[("scope", "mcp:tools openid")]).await;
    let narrow = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert_eq!(narrow.body["scope"], "mcp:tools");
    let refused = initialize_as(&serve, &narrow.access).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );
    assert!(
        challenge.contains(r#"scope="mcp:tools mcp:admin""#),
        "{challenge}"
    );
    // Refreshing cannot widen the grant.
    let widened = serve
        .send_form(
            "/token",
            &[],
            &[
                ("grant_type", "refresh_token"),
                ("client_id", &client_id),
                ("refresh_token", &narrow.refresh),
                ("scope", "mcp:tools mcp:admin"),
            ],
        )
        .await;
    assert_eq!(widened.json()["error"], "invalid_grant", "{}", widened.body);

    // Asking for nothing grants everything offered.
    let pkce = Pkce::new();
    let code = code_for(&serve, &client_id, &pkce, &[]).await;
    let full = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert_eq!(full.body["scope"], "mcp:tools mcp:admin");
    assert_eq!(initialize_as(&serve, &full.access).await.status, 200);
}

#[tokio::test]
async fn the_user_comes_from_a_trusted_proxy_header_only() {
    let dir = tempfile::tempdir().unwrap();
    let trusting = start_behind_proxy(&dir).await;
    let client_id = register(&trusting).await;
    let pkce = Pkce::new();
    let path = authorize_path(&client_id, &pkce, &[]);
    let approved = consent(
        &trusting,
        &path,
        &[("x-forwarded-user", "bob@example.com")],
        "approve",
    )
    .await;
    let code = location_param(&approved, "code").expect("a code");
    let bob = tokens(&redeem(&trusting, &client_id, &code, &pkce.verifier).await);
    assert_eq!(initialize_as(&trusting, &bob.access).await.status, 200);
    trusting.wait_stderr("principal=bob@example.com").await;
    // No header: no user, and the client is told so.
    let nobody = trusting.send("GET", &path, &[], "").await;
    assert_eq!(nobody.status, 303);
    assert_eq!(
        location_param(&nobody, "error").as_deref(),
        Some("access_denied")
    );
    drop(trusting);

    // The same header from an address that is not a trusted proxy is not believed.
    let dir = tempfile::tempdir().unwrap();
    let wary = start_as(
        &dir,
        &[
            "--trusted-user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "10.0.0.0/8",
        ],
    )
    .await;
    let client_id = register(&wary).await;
    let path = authorize_path(&client_id, &Pkce::new(), &[]);
    let forged = wary
        .send("GET", &path, &[("x-forwarded-user", "admin")], "")
        .await;
    assert_eq!(forged.status, 303, "{}", forged.body);
    assert_eq!(
        location_param(&forged, "error").as_deref(),
        Some("access_denied")
    );
    assert!(location_param(&forged, "code").is_none());
    wary.wait_stderr("not a --trusted-proxy").await;
}

#[tokio::test]
async fn two_users_get_two_children_and_cannot_use_each_others_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(
        &dir,
        &[
            "--trusted-user-header",
            "X-User",
            "--trusted-proxy",
            "127.0.0.1/32",
        ],
    )
    .await;
    let client_id = register(&serve).await;
    let mut access = Vec::new();
    for user in ["ann", "ben"] {
        let pkce = Pkce::new();
        let answer = consent(
            &serve,
            &authorize_path(&client_id, &pkce, &[]),
            &[("x-user", user)],
            "approve",
        )
        .await;
        let code = location_param(&answer, "code").unwrap();
        access.push(tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await).access);
    }
    let ann_session = initialize_as(&serve, &access[0]).await.session();
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}).to_string();
    let as_ann = format!("Bearer {}", access[0]);
    let own = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &as_ann), ("mcp-session-id", &ann_session)],
            &call,
        )
        .await;
    assert_eq!(
        own.status, 200,
        "the session answers its owner: {}",
        own.body
    );
    let as_ben = format!("Bearer {}", access[1]);
    let stolen = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &as_ben), ("mcp-session-id", &ann_session)],
            &call,
        )
        .await;
    assert_eq!(stolen.status, 404, "{}", stolen.body);
    // Modern clients: one pooled child per principal.
    let pid = |token: &str| {
        let auth = format!("Bearer {token}");
        let serve = &serve;
        async move {
            let answer = serve
                .modern_with(
                    json!(2),
                    "tools/call",
                    json!({"name": "whoami", "arguments": {}}),
                    Some("whoami"),
                    &[("authorization", &auth)],
                )
                .await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            let value: Value = answer.json();
            value["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let (ann_pid, ben_pid) = (pid(&access[0]).await, pid(&access[1]).await);
    assert_ne!(ann_pid, ben_pid);
    assert_eq!(pid(&access[0]).await, ann_pid);
}

#[tokio::test]
async fn an_https_public_url_with_a_path_makes_the_issuer_and_iss_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &["--public-url", "https://mcp.example.com/team/mcp"]).await;
    let issuer = "https://mcp.example.com/team";
    // RFC 8414 path insertion: the metadata of issuer https://host/team is at
    // /.well-known/oauth-authorization-server/team.
    let metadata = serve
        .send(
            "GET",
            "/.well-known/oauth-authorization-server/team",
            &[],
            "",
        )
        .await
        .json();
    assert_eq!(metadata["issuer"], issuer);
    assert_eq!(
        metadata["authorization_endpoint"],
        format!("{issuer}/authorize")
    );
    assert_eq!(
        metadata["authorization_response_iss_parameter_supported"],
        true
    );
    let prm = serve
        .send("GET", "/.well-known/oauth-protected-resource/mcp", &[], "")
        .await
        .json();
    assert_eq!(prm["resource"], "https://mcp.example.com/team/mcp");
    assert_eq!(prm["authorization_servers"], json!([issuer]));

    // A proxy may keep the prefix or strip it: both paths reach the endpoints.
    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    let page = serve
        .send(
            "GET",
            &format!("/team{}", authorize_path(&client_id, &pkce, &[])),
            &[],
            "",
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains(&format!("action=\"{issuer}/authorize\"")),
        "{}",
        page.body
    );
    let answer = consent(
        &serve,
        &authorize_path(&client_id, &pkce, &[]),
        &[],
        "approve",
    )
    .await;
    assert_eq!(
        location_param(&answer, "iss").as_deref(),
        Some(issuer),
        "RFC 9207"
    );
    let code = location_param(&answer, "code").unwrap();
    let tokens = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert_eq!(initialize_as(&serve, &tokens.access).await.status, 200);
    assert_eq!(initialize_as(&serve, "mcpat_not-a-token").await.status, 401);

    // Each decision is counted by outcome.
    let auth = format!("Bearer {}", tokens.access);
    let metrics = serve
        .send("GET", "/metrics", &[("authorization", &auth)], "")
        .await;
    assert!(
        metrics
            .body
            .contains(r#"mcp_stdio_auth_total{outcome="accepted"}"#),
        "{}",
        metrics.body
    );
    assert!(
        metrics
            .body
            .contains(r#"mcp_stdio_auth_total{outcome="unknown_token"} 1"#),
        "{}",
        metrics.body
    );
}
