//! The attack corpus on the embedded authorization server: each attack is refused, says
//! why, issues nothing, and leaves what was already granted as it was (or, for a replay,
//! revokes exactly the family it came from).

use serde_json::json;

use crate::common::serve::*;
use crate::common::signin::*;
use crate::serve_oauth::{no_secret_in_the_audit_log, start_as, start_behind_proxy};

fn error_of(answer: &Answer) -> String {
    answer.json()["error"].as_str().unwrap_or("").to_owned()
}

#[tokio::test]
async fn pkce_is_required_and_only_s256() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &[]).await;
    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    // `plain`, and no challenge at all: sent back as invalid_request, no consent page.
    let plain = authorize_path(&client_id, &pkce, &[]).replace("S256", "plain");
    let missing = authorize_path(&client_id, &pkce, &[])
        .replace(&format!("&code_challenge={}", pkce.challenge), "");
    for path in [plain, missing] {
        let answer = serve.send("GET", &path, &[], "").await;
        assert_eq!(answer.status, 303, "{path}: {}", answer.body);
        assert_eq!(
            location_param(&answer, "error").as_deref(),
            Some("invalid_request")
        );
        assert!(location_param(&answer, "code").is_none());
    }
    // A code redeemed without a verifier, or with a wrong one, gets no token; the wrong
    // one spends the code.
    let code = code_for(&serve, &client_id, &pkce, &[]).await;
    let without = serve
        .send_form(
            "/token",
            &[],
            &[
                ("grant_type", "authorization_code"),
                ("client_id", &client_id),
                ("code", &code),
                ("redirect_uri", REDIRECT),
            ],
        )
        .await;
    assert_eq!(
        (without.status, error_of(&without)),
        (400, "invalid_request".into())
    );
    let wrong = redeem(&serve, &client_id, &code, &Pkce::new().verifier).await;
    assert_eq!(
        (wrong.status, error_of(&wrong)),
        (400, "invalid_grant".into())
    );
    let right_too_late = redeem(&serve, &client_id, &code, &pkce.verifier).await;
    assert_eq!(error_of(&right_too_late), "invalid_grant");
}

#[tokio::test]
async fn a_replayed_code_revokes_the_tokens_it_produced() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &[]).await;
    let (_, bystander) = sign_in(&serve).await;
    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    let code = code_for(&serve, &client_id, &pkce, &[]).await;
    let stolen = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert_eq!(initialize_as(&serve, &stolen.access).await.status, 200);
    let replay = redeem(&serve, &client_id, &code, &pkce.verifier).await;
    assert_eq!(error_of(&replay), "invalid_grant", "{}", replay.body);
    assert_eq!(initialize_as(&serve, &stolen.access).await.status, 401);
    assert_eq!(
        refresh(&serve, &client_id, &stolen.refresh).await.status,
        400
    );
    // Another grant is untouched.
    assert_eq!(initialize_as(&serve, &bystander.access).await.status, 200);
    serve.wait_stderr("whole grant is revoked").await;
    no_secret_in_the_audit_log(
        &dir,
        &[
            &code,
            &pkce.verifier,
            &stolen.access,
            &stolen.refresh,
            &bystander.access,
            &bystander.refresh,
        ],
    )
    .await;
}

#[tokio::test]
async fn a_code_and_a_refresh_token_work_only_for_their_own_client() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &[]).await;
    let (victim, victim_tokens) = sign_in(&serve).await;
    let attacker = register(&serve).await;
    let pkce = Pkce::new();
    let code = code_for(&serve, &victim, &pkce, &[]).await;
    let swapped = redeem(&serve, &attacker, &code, &pkce.verifier).await;
    assert_eq!(error_of(&swapped), "invalid_grant");
    let taken = refresh(&serve, &attacker, &victim_tokens.refresh).await;
    assert_eq!(error_of(&taken), "invalid_grant");
    let unknown_client = refresh(&serve, "not-a-client", &victim_tokens.refresh).await;
    assert_eq!(
        (unknown_client.status, error_of(&unknown_client)),
        (401, "invalid_client".into())
    );
    let revoke_as_attacker = serve
        .send_form(
            "/revoke",
            &[],
            &[("token", &victim_tokens.refresh), ("client_id", &attacker)],
        )
        .await;
    assert_eq!(revoke_as_attacker.status, 200);
    assert_eq!(
        initialize_as(&serve, &victim_tokens.access).await.status,
        200,
        "still the victim's"
    );
    assert_eq!(
        refresh(&serve, &victim, &victim_tokens.refresh)
            .await
            .status,
        200
    );
    no_secret_in_the_audit_log(
        &dir,
        &[
            &code,
            &pkce.verifier,
            &victim_tokens.access,
            &victim_tokens.refresh,
        ],
    )
    .await;
}

#[tokio::test]
async fn redirect_problems_get_a_page_never_a_redirect() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(
        &dir,
        &["--allow-redirect-uri", "https://app.example.com/cb"],
    )
    .await;
    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    for evil in [
        "https://evil.example.com/callback",
        "http://127.0.0.1.evil.example.com/callback",
        "http://127.0.0.1:7777/other",
        "https://app.example.com/cb",
        "//evil.example.com/callback",
    ] {
        let path = authorize_path(&client_id, &pkce, &[]).replace(
            &url::form_urlencoded::byte_serialize(REDIRECT.as_bytes()).collect::<String>(),
            &url::form_urlencoded::byte_serialize(evil.as_bytes()).collect::<String>(),
        );
        let answer = serve.send("GET", &path, &[], "").await;
        assert_eq!(answer.status, 400, "{evil}: {}", answer.body);
        assert!(answer.headers.get("location").is_none(), "{evil}");
        assert!(
            answer.body.contains("not one this client registered"),
            "{}",
            answer.body
        );
    }
    let unknown = serve
        .send(
            "GET",
            &authorize_path("no-such-client", &pkce, &[]),
            &[],
            "",
        )
        .await;
    assert_eq!(unknown.status, 400);
    assert!(unknown.headers.get("location").is_none());
    // A loopback redirect with another port is the same registration (RFC 8252).
    let other_port = authorize_path(&client_id, &pkce, &[]).replace("7777", "8888");
    assert_eq!(serve.send("GET", &other_port, &[], "").await.status, 200);
    // Another resource than this server: sent back as invalid_target.
    let elsewhere = authorize_path(
        &client_id,
        &pkce,
        &[("resource", "https://other.example.com/mcp")],
    );
    let answer = serve.send("GET", &elsewhere, &[], "").await;
    assert_eq!(
        location_param(&answer, "error").as_deref(),
        Some("invalid_target")
    );
    // Parameters given twice.
    let doubled = format!("{}&state=again", authorize_path(&client_id, &pkce, &[]));
    assert_eq!(serve.send("GET", &doubled, &[], "").await.status, 303);
}

#[tokio::test]
async fn registration_refuses_what_it_cannot_honour() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &["--oauth-max-form-size", "2048"]).await;
    let cases = [
        ("not json".to_owned(), 400, "invalid_client_metadata"),
        ("[]".to_owned(), 400, "invalid_client_metadata"),
        (json!({}).to_string(), 400, "invalid_redirect_uri"),
        (json!({"redirect_uris": []}).to_string(), 400, "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://evil.example.com/cb"]}).to_string(), 400, "invalid_redirect_uri"),
        (json!({"redirect_uris": ["javascript:alert(1)"]}).to_string(), 400, "invalid_redirect_uri"),
        (json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}).to_string(), 400, "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}).to_string(), 400, "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "client_name": "x".repeat(300)}).to_string(), 400, "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "client_name": "a".repeat(4000)}).to_string(), 413, "invalid_request"),
    ];
    for (body, status, error) in cases {
        let answer = serve.send("POST", "/register", &[], &body).await;
        assert_eq!(answer.status, status, "{body:.80}: {}", answer.body);
        assert_eq!(error_of(&answer), error, "{body:.80}");
        assert!(
            answer.json()["error_description"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
    }
    // The channel is alive: a good registration still works.
    register(&serve).await;
}

/// A client that revokes (or replays) its own tokens in a loop must not send every other
/// caller back to the store: only the revoked grant's tokens are forgotten.
#[tokio::test]
async fn revoking_a_grant_forgets_only_that_grant_s_tokens() {
    const LOOKUP: &str = "looked up in the store";
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &[]).await;
    let (_, bystander) = sign_in(&serve).await;
    let lookups = || serve.stderr().matches(LOOKUP).count();
    assert_eq!(initialize_as(&serve, &bystander.access).await.status, 200);
    // The channel is alive: the first use of a token is looked up, and logged.
    serve.wait_stderr(LOOKUP).await;
    assert_eq!(initialize_as(&serve, &bystander.access).await.status, 200);
    let remembered = lookups();

    // The attacker's own grant, revoked with its refresh token.
    let (client_id, own) = sign_in(&serve).await;
    assert_eq!(initialize_as(&serve, &own.access).await.status, 200);
    let revoked = serve
        .send_form(
            "/revoke",
            &[],
            &[("token", &own.refresh), ("client_id", &client_id)],
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(
        initialize_as(&serve, &own.access).await.status,
        401,
        "the revoked grant's token is forgotten at once"
    );
    // A replayed refresh token ends its grant the same way.
    let (client_id, replayed) = sign_in(&serve).await;
    assert_eq!(initialize_as(&serve, &replayed.access).await.status, 200);
    assert_eq!(
        refresh(&serve, &client_id, &replayed.refresh).await.status,
        200
    );
    assert_eq!(
        refresh(&serve, &client_id, &replayed.refresh).await.status,
        400
    );
    assert_eq!(initialize_as(&serve, &replayed.access).await.status, 401);

    // Every lookup so far is in the log before counting: the bystander's first, the
    // attacker's two grants twice each (in use, then refused after the revocation).
    let log = || serve.stderr();
    crate::common::wait_logged_count(log, &[LOOKUP], remembered + 4).await;
    let before = lookups();
    for _ in 0..3 {
        assert_eq!(initialize_as(&serve, &bystander.access).await.status, 200);
    }
    // A token nobody remembers is looked up: once its line is in the log, so would be any
    // the bystander's requests caused.
    let unknown = format!("mcpat_{}", "A".repeat(43));
    assert_eq!(initialize_as(&serve, &unknown).await.status, 401);
    crate::common::wait_logged_count(log, &[LOOKUP], before + 1).await;
    assert_eq!(
        lookups(),
        before + 1,
        "the bystander's token stayed remembered through the others' revocations"
    );
}

/// A proxy that appends the user header instead of replacing it (Envoy's default) passes
/// the client's own value along with its own: whichever comes first must not win.
#[tokio::test]
async fn a_user_header_given_twice_or_as_a_list_signs_nobody_in() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_behind_proxy(&dir).await;
    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    let path = authorize_path(&client_id, &pkce, &[]);
    // The channel is alive: one value from the proxy is a user and gets a consent page.
    let bob = [("x-forwarded-user", "bob")];
    let page = serve.send("GET", &path, &bob, "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let mut fields = form_fields(&page.body);
    fields.push(("decision".into(), "approve".into()));
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();

    let appended = [("x-forwarded-user", "admin"), ("x-forwarded-user", "bob")];
    let listed = [("x-forwarded-user", "admin, bob")];
    for headers in [&appended[..], &listed[..]] {
        let shown = serve.send("GET", &path, headers, "").await;
        assert_eq!(shown.status, 400, "{headers:?}: {}", shown.body);
        assert!(
            shown.body.contains("X-Forwarded-User") || shown.body.contains("x-forwarded-user"),
            "{}",
            shown.body
        );
        assert!(shown.headers.get("location").is_none());
        assert!(
            !shown.body.contains("csrf"),
            "no consent form: {}",
            shown.body
        );
        // The consent form bob was shown, posted with the ambiguous header: no code.
        let posted = serve.send_form("/authorize", headers, &pairs).await;
        assert_eq!(posted.status, 400, "{headers:?}: {}", posted.body);
        assert!(posted.headers.get("location").is_none());
    }
    serve.wait_stderr("ambiguous_user").await;
    // Bob's own form, with one header, still gives bob his code: nothing was spent.
    let approved = serve.send_form("/authorize", &bob, &pairs).await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let code = location_param(&approved, "code").expect("a code for bob");
    let tokens = tokens(&redeem(&serve, &client_id, &code, &pkce.verifier).await);
    assert_eq!(initialize_as(&serve, &tokens.access).await.status, 200);
    serve.wait_stderr("principal=bob").await;
    assert!(!serve.stderr().contains("principal=admin"));
}

#[tokio::test]
async fn a_forged_or_stale_consent_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(&dir, &[]).await;
    let client_id = register(&serve).await;
    let pkce = Pkce::new();
    let page = serve
        .send("GET", &authorize_path(&client_id, &pkce, &[]), &[], "")
        .await;
    let mut fields = form_fields(&page.body);
    fields.push(("decision".into(), "approve".into()));
    let post = |fields: Vec<(String, String)>| {
        let serve = &serve;
        async move {
            let pairs: Vec<(&str, &str)> = fields
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            serve.send_form("/authorize", &[], &pairs).await
        }
    };
    let without_csrf: Vec<_> = fields
        .iter()
        .filter(|(k, _)| k != "csrf")
        .cloned()
        .collect();
    let forged: Vec<_> = fields
        .iter()
        .map(|(k, v)| {
            if k == "csrf" {
                (k.clone(), "1.AAAA".to_owned())
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect();
    // The token is for this exact request: another challenge (the attacker's) fails.
    let other_request: Vec<_> = fields
        .iter()
        .map(|(k, v)| {
            if k == "code_challenge" {
                (k.clone(), Pkce::new().challenge)
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect();
    for attempt in [without_csrf, forged, other_request] {
        let answer = post(attempt).await;
        assert_eq!(answer.status, 400, "{}", answer.body);
        assert!(answer.headers.get("location").is_none());
    }
    // The genuine form still works (the channel is alive).
    let answer = post(fields).await;
    assert_eq!(answer.status, 303);
    assert!(location_param(&answer, "code").is_some());
    // Denying sends access_denied back.
    let denied = consent(
        &serve,
        &authorize_path(&client_id, &Pkce::new(), &[]),
        &[],
        "deny",
    )
    .await;
    assert_eq!(
        location_param(&denied, "error").as_deref(),
        Some("access_denied")
    );
}

#[tokio::test]
async fn every_table_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_as(
        &dir,
        &[
            "--oauth-max-clients",
            "2",
            "--oauth-max-grants",
            "1",
            "--oauth-max-pending-codes",
            "1",
        ],
    )
    .await;
    // Clients: the oldest one not in use is recycled; one with a live grant never is.
    let (first, first_tokens) = sign_in(&serve).await;
    let second = register(&serve).await;
    let third = register(&serve).await;
    let recycled = serve
        .send("GET", &authorize_path(&second, &Pkce::new(), &[]), &[], "")
        .await;
    assert_eq!(recycled.status, 400, "{}", recycled.body);
    let kept = serve
        .send("GET", &authorize_path(&first, &Pkce::new(), &[]), &[], "")
        .await;
    assert_eq!(kept.status, 200, "{}", kept.body);
    assert_eq!(
        initialize_as(&serve, &first_tokens.access).await.status,
        200
    );
    // Pending codes: one waits, the next sign-in is told to try again.
    let pkce = Pkce::new();
    let waiting = code_for(&serve, &third, &pkce, &[]).await;
    let refused = consent(
        &serve,
        &authorize_path(&third, &Pkce::new(), &[]),
        &[],
        "approve",
    )
    .await;
    assert_eq!(
        location_param(&refused, "error").as_deref(),
        Some("temporarily_unavailable")
    );
    // Grants: a second one revokes the one expiring soonest.
    let one = tokens(&redeem(&serve, &third, &waiting, &pkce.verifier).await);
    assert_eq!(initialize_as(&serve, &one.access).await.status, 200);
    let pkce = Pkce::new();
    let code = code_for(&serve, &third, &pkce, &[]).await;
    let two = tokens(&redeem(&serve, &third, &code, &pkce.verifier).await);
    assert_eq!(initialize_as(&serve, &two.access).await.status, 200);
    assert_eq!(initialize_as(&serve, &one.access).await.status, 401);
}

#[tokio::test]
async fn a_client_id_url_on_a_private_address_is_never_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let urls = [
        "https://169.254.169.254/latest/client.json",
        "https://127.0.0.1/client.json",
        "https://10.0.0.7/client.json",
        "https://localhost/client.json",
    ];
    let mut flags = Vec::new();
    for url in urls {
        flags.extend(["--allow-client-id-url", url]);
    }
    let serve = start_as(&dir, &flags).await;
    let metadata = serve
        .send("GET", "/.well-known/oauth-authorization-server", &[], "")
        .await
        .json();
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    for url in urls {
        let answer = serve
            .send("GET", &authorize_path(url, &Pkce::new(), &[]), &[], "")
            .await;
        assert_eq!(answer.status, 400, "{url}: {}", answer.body);
        assert!(answer.headers.get("location").is_none());
        assert!(
            answer.body.contains("not a public address"),
            "{url}: {}",
            answer.body
        );
    }
    // Nor can one be used at the token endpoint.
    let token = serve
        .send_form(
            "/token",
            &[],
            &[
                ("grant_type", "refresh_token"),
                ("client_id", urls[0]),
                ("refresh_token", "x"),
            ],
        )
        .await;
    assert_eq!(token.status, 401, "{}", token.body);
}

#[tokio::test]
async fn a_sign_in_callback_that_serve_did_not_start_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("oauth.db").display());
    // The provider is unreachable: discovery is lazy, so serve starts, and says so at use.
    let serve = Serve::start_with(
        &[
            "--enable-oauth",
            "--oauth-store",
            &store,
            "--login-oidc",
            "http://127.0.0.1:9",
        ],
        &[fixture().as_str()],
        &[
            ("MCP_STDIO_LOGIN_CLIENT_ID", "c"),
            ("MCP_STDIO_LOGIN_CLIENT_SECRET", "login-secret-value"),
        ],
    )
    .await;
    let client_id = register(&serve).await;
    let start = serve
        .send(
            "GET",
            &authorize_path(&client_id, &Pkce::new(), &[]),
            &[],
            "",
        )
        .await;
    assert_eq!(start.status, 303);
    assert_eq!(
        location_param(&start, "error").as_deref(),
        Some("temporarily_unavailable")
    );
    for query in [
        "state=made-up&code=x",
        "code=x",
        "state=made-up&error=access_denied",
    ] {
        let answer = serve
            .send("GET", &format!("/login-callback?{query}"), &[], "")
            .await;
        assert!(
            answer.status == 403 || answer.status == 400,
            "{query}: {}",
            answer.body
        );
        assert!(answer.headers.get("location").is_none());
    }
    // A consent form without the sign-in's user is refused, whatever else it holds.
    let pkce = Pkce::new();
    let forged = serve
        .send_form(
            "/authorize",
            &[],
            &[
                ("response_type", "code"),
                ("client_id", &client_id),
                ("redirect_uri", REDIRECT),
                ("code_challenge", &pkce.challenge),
                ("code_challenge_method", "S256"),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(forged.status, 400, "{}", forged.body);
    assert!(location_param(&forged, "code").is_none());
    assert!(!serve.stderr().contains("login-secret-value"));
}

/// Registration is open, so anyone can start sign-ins; a flood of
/// them (more than the thousand that used to fill the table) from one client and one
/// address flushes nobody: the pending sign-in lives in its sealed `state`, not here.
#[tokio::test]
async fn pending_sign_ins_cannot_be_flushed() {
    // The provider only needs metadata here: another serve's authorization server.
    let provider_dir = tempfile::tempdir().unwrap();
    let provider = start_as(&provider_dir, &[]).await;
    let issuer = format!("http://127.0.0.1:{}", provider.port);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("oauth.db").display());
    let serve = Serve::start_with(
        &[
            "--enable-oauth",
            "--oauth-store",
            &store,
            "--login-oidc",
            &issuer,
            // The old table's bound, at its smallest: the flood below evicted the victim at
            // once. It is accepted and ignored now.
            "--login-max-pending",
            "1",
        ],
        &[fixture().as_str()],
        &[
            ("MCP_STDIO_LOGIN_CLIENT_ID", "c"),
            ("MCP_STDIO_LOGIN_CLIENT_SECRET", "login-secret-value"),
        ],
    )
    .await;
    let start = |client: &str| {
        let path = authorize_path(client, &Pkce::new(), &[]);
        let serve = &serve;
        async move { serve.send("GET", &path, &[], "").await }
    };
    let victim = register(&serve).await;
    let signing_in = start(&victim).await;
    assert_eq!(signing_in.status, 303, "{}", signing_in.body);
    assert!(
        signing_in.headers["location"]
            .to_str()
            .unwrap()
            .starts_with(&issuer)
    );
    let state = location_param(&signing_in, "state").unwrap();

    let attacker = register(&serve).await;
    for n in 0..1200 {
        let flood = start(&attacker).await;
        assert_eq!(flood.status, 303, "{n}: {}", flood.body);
    }
    // The victim's sign-in is still there: the provider's answer reaches it (here a
    // refusal at the provider, which needs no provider login), while a made-up state is
    // unknown.
    let callback = |state: String| {
        let serve = &serve;
        async move {
            serve
                .send(
                    "GET",
                    &format!("/login-callback?state={state}&error=access_denied"),
                    &[],
                    "",
                )
                .await
        }
    };
    let back = callback(state).await;
    assert!(
        back.body
            .contains("the identity provider refused the sign-in"),
        "{}",
        back.body
    );
    let made_up = callback("made-up".into()).await;
    assert!(made_up.body.contains("unknown"), "{}", made_up.body);
    serve
        .wait_stderr("--login-max-pending is no longer needed")
        .await;
    assert!(!serve.stderr().contains("login-secret-value"));
}
