//! `serve --oauth-issuer`: resource-server mode against a fake authorization server that
//! publishes real ES256 keys. Good tokens pass and name their principal; sessions and
//! pooled children stay with it; the attack corpus is refused with 401 and changes
//! nothing; a key rotation is picked up with one refetch; no token reaches the log.

use serde_json::{Value, json};

use crate::common::eventually;
use crate::common::issuer::{INTROSPECTION_CLIENT, Issuer, SigningKey};
use crate::common::serve::*;

const AUDIENCE: &str = "http://127.0.0.1/mcp";
const SCOPE: &str = "mcp:tools";

async fn start(issuer: &Issuer, extra: &[&str]) -> Serve {
    start_with_env(issuer, extra, &[]).await
}

/// serve in resource-server mode for `issuer` (debug logging), plus `extra` and `env`.
async fn start_with_env(issuer: &Issuer, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut flags = vec![
        "--oauth-issuer",
        issuer.url.as_str(),
        "--oauth-audience",
        AUDIENCE,
        "--oauth-scope",
        SCOPE,
        "--log-level",
        "debug",
    ];
    flags.extend_from_slice(extra);
    Serve::start_with(&flags, &[fixture().as_str()], env).await
}

/// serve that introspects opaque tokens at `issuer`, presenting `secret` as its client secret.
async fn start_introspecting(issuer: &Issuer, secret: &str, extra: &[&str]) -> Serve {
    let introspection = format!("{}/introspect", issuer.url);
    let mut flags = vec!["--introspection-url", introspection.as_str()];
    flags.extend_from_slice(extra);
    let env = [
        ("MCP_STDIO_INTROSPECTION_CLIENT_ID", INTROSPECTION_CLIENT.0),
        ("MCP_STDIO_INTROSPECTION_CLIENT_SECRET", secret),
    ];
    start_with_env(issuer, &flags, &env).await
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn whoami_modern(serve: &Serve, token: &str, id: u64) -> String {
    let auth = bearer(token);
    let answer = serve
        .modern_with(
            json!(id),
            "tools/call",
            json!({"name": "whoami", "arguments": {}}),
            Some("whoami"),
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn challenge(answer: &Answer) -> String {
    answer.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn good_tokens_name_their_principal_and_users_stay_apart() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let serve = start(&issuer, &[]).await;

    // No token: 401 naming the metadata and the scope to ask for.
    let anonymous = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let header = challenge(&anonymous);
    assert!(
        header.contains("resource_metadata=\"http://127.0.0.1:"),
        "{header}"
    );
    assert!(header.contains(r#"scope="mcp:tools""#), "{header}");
    let metadata = serve
        .send("GET", "/.well-known/oauth-protected-resource/mcp", &[], "")
        .await;
    assert_eq!(
        metadata.json()["authorization_servers"],
        json!([issuer.url])
    );
    assert_eq!(metadata.json()["scopes_supported"], json!([SCOPE]));

    let alice = key.sign(&issuer.claims("alice", AUDIENCE, SCOPE), None);
    let bob = key.sign(&issuer.claims("bob", AUDIENCE, "openid mcp:tools"), None);

    // A legacy session belongs to who created it: bob's token on it finds nothing.
    let created = initialize_as(&serve, &alice).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let session = created.session();
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"mine"}}}).to_string();
    let (as_alice, as_bob) = (bearer(&alice), bearer(&bob));
    let own = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &as_alice), ("mcp-session-id", &session)],
            &call,
        )
        .await;
    assert_eq!(own.status, 200, "{}", own.body);
    let stolen = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &as_bob), ("mcp-session-id", &session)],
            &call,
        )
        .await;
    assert_eq!(stolen.status, 404, "{}", stolen.body);

    // 2026-07-28 clients: one pooled child per principal.
    let alice_pid = whoami_modern(&serve, &alice, 2).await;
    assert_eq!(whoami_modern(&serve, &alice, 3).await, alice_pid);
    let bob_pid = whoami_modern(&serve, &bob, 4).await;
    assert_ne!(alice_pid, bob_pid, "two users, two children");

    serve.wait_stderr("principal=alice").await;
    assert!(!serve.stderr().contains(&alice), "a token reached the log");
    assert!(!serve.stderr().contains(&bob), "a token reached the log");
}

#[tokio::test]
async fn the_attack_corpus_is_refused_and_changes_nothing() {
    let key = SigningKey::generate("k1");
    let stranger = SigningKey::generate("k1"); // same kid, another key
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let serve = start(&issuer, &["--audit-log", audit.to_str().unwrap()]).await;
    let good = issuer.claims("mallory", AUDIENCE, SCOPE);
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = good.clone();
        change(&mut claims);
        claims
    };
    let now = good["iat"].as_u64().unwrap();
    let header_only = |header: Value, claims: &Value| {
        use base64::Engine;
        let b64 =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.", b64(&header), b64(claims))
    };
    // The key's public coordinates as an HMAC secret: the algorithm-confusion attack.
    let public_as_secret = key.jwk().to_string();
    let hmac_confused = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("k1".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &good,
        &jsonwebtoken::EncodingKey::from_secret(public_as_secret.as_bytes()).unwrap(),
    )
    .unwrap();
    let corpus: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            key.sign(
                &with(&|c| {
                    c["exp"] = json!(now - 3600);
                    c["iat"] = json!(now - 7200);
                }),
                None,
            ),
            "expired",
        ),
        (
            "not yet valid",
            key.sign(&with(&|c| c["nbf"] = json!(now + 3600)), None),
            "not_yet_valid",
        ),
        (
            "wrong audience",
            key.sign(
                &with(&|c| c["aud"] = json!("https://elsewhere.example/mcp")),
                None,
            ),
            "wrong_audience",
        ),
        (
            "wrong issuer",
            key.sign(&with(&|c| c["iss"] = json!("https://evil.example")), None),
            "wrong_issuer",
        ),
        (
            "no subject",
            key.sign(
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("sub");
                }),
                None,
            ),
            "bad_claims",
        ),
        (
            "alg none",
            header_only(json!({"alg": "none", "kid": "k1"}), &good),
            "malformed",
        ),
        ("HMAC with the public key", hmac_confused, "wrong_algorithm"),
        (
            "another key, same kid",
            stranger.sign(&good, None),
            "bad_signature",
        ),
        (
            "unknown kid",
            key.sign(&good, Some("nobody")),
            "unknown_key",
        ),
        ("not a JWT", "opaque-token-value-12345".into(), "malformed"),
    ];
    for (what, token, outcome) in &corpus {
        let answer = initialize_as(&serve, token).await;
        assert_eq!(answer.status, 401, "{what}: {}", answer.body);
        let header = challenge(&answer);
        assert!(
            header.contains(r#"error="invalid_token""#),
            "{what}: {header}"
        );
        assert!(
            header.contains(&format!(r#"error_description="{outcome}""#)),
            "{what}: {header}"
        );
        assert!(answer.headers.get("mcp-session-id").is_none(), "{what}");
    }
    // A good token without the required scope: 403 with the scope to ask for.
    let narrow = key.sign(&issuer.claims("mallory", AUDIENCE, "openid"), None);
    let answer = initialize_as(&serve, &narrow).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(challenge(&answer).contains(r#"error="insufficient_scope", scope="mcp:tools""#));

    // The channel is alive, and nothing was created by the refused requests.
    let good_token = key.sign(&good, None);
    let auth = bearer(&good_token);
    let metrics = serve
        .send("GET", "/metrics", &[("authorization", &auth)], "")
        .await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.contains("mcp_stdio_sessions_created_total 0"),
        "{}",
        metrics.body
    );
    for outcome in [
        "expired",
        "wrong_audience",
        "wrong_issuer",
        "wrong_algorithm",
        "bad_signature",
        "unknown_key",
        "malformed",
        "insufficient_scope",
    ] {
        assert!(
            metrics
                .body
                .contains(&format!("mcp_stdio_auth_total{{outcome=\"{outcome}\"}}")),
            "{outcome}: {}",
            metrics.body
        );
    }
    // The log is alive (the refusals are in it) before it is searched for tokens.
    serve.wait_stderr("authentication refused").await;
    let log = serve.stderr();
    for (what, token, _) in &corpus {
        assert!(
            !log.contains(token.as_str()),
            "{what}: the token reached the log"
        );
    }
    assert!(!log.contains(&good_token));
    // Nor the audit log: a good request's line first (the channel is alive).
    assert_eq!(initialize_as(&serve, &good_token).await.status, 200);
    let lines = crate::common::eventually("the good request's audit line", async || {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        if text.contains("\"principal\":\"mallory\"") {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    for (what, token, _) in &corpus {
        assert!(
            !lines.contains(token.as_str()),
            "{what}: the token reached the audit log"
        );
    }
    assert!(!lines.contains(&good_token));
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_unknown_kids_do_not_flood_the_issuer() {
    let old = SigningKey::generate("old");
    let new = SigningKey::generate("new");
    let issuer = Issuer::start(&[&old]).await;
    let serve = start(&issuer, &["--oauth-jwks-refetch", "1"]).await;
    let claims = issuer.claims("carol", AUDIENCE, SCOPE);
    assert_eq!(
        initialize_as(&serve, &old.sign(&claims, None)).await.status,
        200
    );
    assert_eq!(issuer.jwks_fetches(), 1);

    // Made-up key ids within the refetch interval: at most one more fetch.
    for n in 0..20 {
        let answer = initialize_as(&serve, &old.sign(&claims, Some(&format!("made-up-{n}")))).await;
        assert_eq!(answer.status, 401);
    }
    assert!(
        issuer.jwks_fetches() <= 2,
        "{} fetches",
        issuer.jwks_fetches()
    );

    // The provider rotates: once the interval has passed, the new key is fetched and used.
    issuer.publish(&[&new]);
    let rotated = new.sign(&claims, None);
    eventually("the rotated key is picked up", async || {
        let answer = initialize_as(&serve, &rotated).await;
        assert!(
            answer.status == 200 || answer.status == 401,
            "{}",
            answer.body
        );
        (answer.status == 200).then_some(()).ok_or(answer.body)
    })
    .await;
    serve
        .wait_stderr("fetched the authorization server's signing keys")
        .await;
}

#[test]
fn a_mix_of_modes_or_a_missing_audience_is_refused_at_startup() {
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--auth-token",
                "abc",
                "--oauth-issuer",
                "http://127.0.0.1:9",
                "--oauth-audience",
                "x",
            ],
            "not several",
        ),
        (
            &["--oauth-issuer", "http://127.0.0.1:9"],
            "--oauth-audience AUDIENCE, or --public-url",
        ),
        (
            &["--oauth-scope", "mcp"],
            "--oauth-scope needs --oauth-issuer",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["serve", "--port", "0"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let (code, stdout, stderr) = crate::common::run_to_end(&args);
        assert_eq!(code, 2, "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!stderr.contains("abc"), "the token was echoed: {stderr}");
        assert!(stdout.is_empty());
    }
}

#[tokio::test]
async fn one_user_cannot_take_every_session() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let serve = start(
        &issuer,
        &["--max-sessions-per-principal", "2", "--max-sessions", "10"],
    )
    .await;
    let dave = key.sign(&issuer.claims("dave", AUDIENCE, SCOPE), None);
    let erin = key.sign(&issuer.claims("erin", AUDIENCE, SCOPE), None);
    for _ in 0..2 {
        assert_eq!(initialize_as(&serve, &dave).await.status, 200);
    }
    let third = initialize_as(&serve, &dave).await;
    assert_eq!(third.status, 429, "{}", third.body);
    assert!(
        third.body.contains("--max-sessions-per-principal (2)"),
        "{}",
        third.body
    );
    // Another user is unaffected.
    assert_eq!(initialize_as(&serve, &erin).await.status, 200);
    // And dave's pooled 2026-07-28 child counts too: he is at his bound.
    let auth = bearer(&dave);
    let modern = serve
        .modern_with(
            json!(9),
            "tools/list",
            json!({}),
            None,
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(modern.status, 429, "{}", modern.body);
}

#[tokio::test]
async fn a_remembered_token_is_refused_once_it_expires() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let serve = start(&issuer, &["--oauth-leeway", "0"]).await;
    let mut claims = issuer.claims("frank", AUDIENCE, SCOPE);
    claims["exp"] = json!(claims["iat"].as_u64().unwrap() + 2);
    let token = key.sign(&claims, None);
    // Accepted (and so remembered), twice.
    assert_eq!(initialize_as(&serve, &token).await.status, 200);
    assert_eq!(initialize_as(&serve, &token).await.status, 200);
    let refused = eventually("the expired token is refused", async || {
        let answer = initialize_as(&serve, &token).await;
        (answer.status == 401)
            .then_some(answer)
            .ok_or_else(|| "still accepted".to_owned())
    })
    .await;
    assert!(challenge(&refused).contains(r#"error_description="expired""#));
}

#[tokio::test]
async fn opaque_tokens_are_introspected_once_and_checked_like_jwts() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let secret = INTROSPECTION_CLIENT.1;
    let serve = start_introspecting(&issuer, secret, &[]).await;
    let claims = issuer.claims("grace", AUDIENCE, SCOPE);
    let mut active = claims.clone();
    active["active"] = json!(true);
    issuer.issue_opaque("opaque-grace", active.clone());
    let mut elsewhere = active.clone();
    elsewhere["aud"] = json!(["https://elsewhere.example/mcp"]);
    issuer.issue_opaque("opaque-elsewhere", elsewhere);
    let mut narrow = active.clone();
    narrow["scope"] = json!("openid");
    issuer.issue_opaque("opaque-narrow", narrow);
    // An answer that names no resource may be for any resource of that server; a
    // `resource` naming this one counts as `aud` does.
    let mut unaddressed = active.clone();
    unaddressed.as_object_mut().unwrap().remove("aud");
    issuer.issue_opaque("opaque-unaddressed", unaddressed.clone());
    let mut by_resource = unaddressed.clone();
    by_resource["resource"] = json!(AUDIENCE);
    issuer.issue_opaque("opaque-by-resource", by_resource);

    assert_eq!(initialize_as(&serve, "opaque-grace").await.status, 200);
    assert_eq!(initialize_as(&serve, "opaque-grace").await.status, 200);
    assert_eq!(
        issuer.introspections(),
        1,
        "the second request used the remembered answer"
    );
    assert_eq!(
        initialize_as(&serve, "opaque-by-resource").await.status,
        200
    );
    for (token, status, outcome) in [
        ("opaque-unknown", 401, "inactive"),
        ("opaque-elsewhere", 401, "wrong_audience"),
        ("opaque-unaddressed", 401, "wrong_audience"),
    ] {
        let answer = initialize_as(&serve, token).await;
        assert_eq!(answer.status, status, "{token}: {}", answer.body);
        assert!(
            challenge(&answer).contains(&format!(r#"error_description="{outcome}""#)),
            "{token}"
        );
    }
    assert_eq!(initialize_as(&serve, "opaque-narrow").await.status, 403);
    // The log is alive (the refusals are in it) before it is searched for secrets.
    serve.wait_stderr("authentication refused").await;
    let log = serve.stderr();
    assert!(
        !log.contains(secret),
        "the introspection secret reached the log"
    );
    assert!(!log.contains("opaque-grace"), "a token reached the log");

    // Wrong credentials for the introspection endpoint: refused, and the log says what to fix.
    let misconfigured = start_introspecting(&issuer, "wrong-secret-0123456789", &[]).await;
    let answer = initialize_as(&misconfigured, "opaque-grace").await;
    assert_eq!(answer.status, 401);
    assert!(challenge(&answer).contains(r#"error_description="introspection_unavailable""#));
    misconfigured
        .wait_stderr("MCP_STDIO_INTROSPECTION_CLIENT_ID")
        .await;
    assert!(!misconfigured.stderr().contains("wrong-secret-0123456789"));
    drop(misconfigured);

    // An operator whose authorization server never names the resource may say so; a
    // token named for another resource is still refused.
    let lenient = start_introspecting(&issuer, secret, &["--introspection-without-audience"]).await;
    assert_eq!(
        initialize_as(&lenient, "opaque-unaddressed").await.status,
        200
    );
    assert_eq!(
        initialize_as(&lenient, "opaque-elsewhere").await.status,
        401
    );
}

#[test]
fn introspection_needs_its_credentials_and_an_issuer() {
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--oauth-issuer",
                "http://127.0.0.1:9",
                "--oauth-audience",
                "x",
                "--introspection-without-audience",
            ],
            "add --introspection-url",
        ),
        (
            &[
                "--oauth-issuer",
                "http://127.0.0.1:9",
                "--oauth-audience",
                "x",
                "--introspection-url",
                "http://127.0.0.1:9/introspect",
            ],
            "MCP_STDIO_INTROSPECTION_CLIENT_ID",
        ),
        (
            &["--introspection-url", "http://127.0.0.1:9/introspect"],
            "need --oauth-issuer",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["serve", "--port", "0"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let (code, _, stderr) = crate::common::run_to_end(&args);
        assert_eq!(code, 2, "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_flood_of_made_up_opaque_tokens_is_bounded_at_the_provider() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    issuer.slow_introspection(200);
    let serve = start_introspecting(
        &issuer,
        INTROSPECTION_CLIENT.1,
        &["--introspection-concurrency", "2"],
    )
    .await;
    let tokens: Vec<String> = (0..8).map(|n| format!("made-up-{n}")).collect();
    let answers =
        futures_util::future::join_all(tokens.iter().map(|t| initialize_as(&serve, t))).await;
    for answer in &answers {
        assert_eq!(answer.status, 401, "{}", answer.body);
        assert!(challenge(answer).contains(r#"error_description="inactive""#));
    }
    assert_eq!(issuer.introspections(), 8);
    assert!(
        issuer.most_introspections_in_flight() <= 2,
        "{} at once",
        issuer.most_introspections_in_flight()
    );
    // A dead token retried is not asked about again.
    assert_eq!(initialize_as(&serve, &tokens[0]).await.status, 401);
    assert_eq!(issuer.introspections(), 8);
}

/// An id_token the issuer signed for a client whose id is this server's
/// audience (an Entra app registration used for both) is not an access token: refused by
/// its claims, or by RFC 9068's `typ` with `--oauth-require-at-jwt`; nothing is started.
#[tokio::test]
async fn an_id_token_does_not_pass_as_an_access_token() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    // No scope required: the case where nothing else would stop an id_token.
    let no_scope = [
        "--oauth-issuer",
        issuer.url.as_str(),
        "--oauth-audience",
        AUDIENCE,
        "--log-level",
        "debug",
    ];
    let serve = Serve::start_with(&no_scope, &[fixture().as_str()], &[]).await;
    let access = key.sign(&issuer.claims("alice", AUDIENCE, SCOPE), None);
    // The channel works: a genuine access token is served.
    assert_eq!(
        whoami_modern(&serve, &access, 1).await,
        whoami_modern(&serve, &access, 2).await
    );
    let id_token = |extra: serde_json::Value| {
        // An id_token names no scope and no client_id.
        let mut claims = issuer.claims("mallory", AUDIENCE, SCOPE);
        claims.as_object_mut().unwrap().remove("client_id");
        claims.as_object_mut().unwrap().remove("scope");
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        key.sign(&claims, None)
    };
    let created_total = || async {
        let metrics = serve
            .send(
                "GET",
                "/metrics",
                &[("authorization", &bearer(&access))],
                "",
            )
            .await
            .body;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("mcp_stdio_sessions_created_total "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{metrics}"))
    };
    let created = created_total().await;
    for forged in [
        id_token(json!({"nonce": "n-1"})),
        id_token(json!({"at_hash": "abc"})),
        id_token(json!({"azp": AUDIENCE})),
        id_token(json!({"typ": "ID", "azp": "web"})),
        id_token(json!({"token_use": "id"})),
    ] {
        let answer = serve
            .send(
                "POST",
                "/mcp",
                &[("authorization", &bearer(&forged))],
                &initialize_body(),
            )
            .await;
        assert_eq!(answer.status, 401, "{forged}: {}", answer.body);
        assert!(
            challenge(&answer).contains("invalid_token"),
            "{}",
            challenge(&answer)
        );
    }
    assert_eq!(created_total().await, created);
    serve.wait_stderr("outcome=\"not_an_access_token\"").await;
    assert!(
        !serve.stderr().contains("mallory"),
        "no id_token's subject got in"
    );

    // Each of them passes without the check: proof the refusals above were that check.
    let mut lenient_flags = no_scope.to_vec();
    lenient_flags.push("--oauth-no-id-token-check");
    let lenient = Serve::start_with(&lenient_flags, &[fixture().as_str()], &[]).await;
    let heuristic_only = id_token(json!({"nonce": "n-2", "azp": AUDIENCE}));
    assert!(!whoami_modern(&lenient, &heuristic_only, 5).await.is_empty());
    let marked = id_token(json!({"typ": "ID"}));
    let refused = lenient
        .send(
            "POST",
            "/mcp",
            &[("authorization", &bearer(&marked))],
            &initialize_body(),
        )
        .await;
    assert_eq!(refused.status, 401, "explicit markers still count");

    // With --oauth-require-at-jwt only RFC 9068 tokens pass.
    let strict = start(&issuer, &["--oauth-require-at-jwt"]).await;
    let plain = strict
        .send(
            "POST",
            "/mcp",
            &[("authorization", &bearer(&access))],
            &initialize_body(),
        )
        .await;
    assert_eq!(plain.status, 401, "{}", plain.body);
    let typed = key.sign_typed(&issuer.claims("alice", AUDIENCE, SCOPE), "at+jwt");
    assert!(!whoami_modern(&strict, &typed, 3).await.is_empty());
}

/// Microsoft Entra puts the scopes in `scp` as one space-separated string, Okta as a list:
/// both satisfy `--oauth-scope`.
#[tokio::test]
async fn scopes_in_scp_as_a_string_or_a_list_both_count() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let serve = start(&issuer, &[]).await;
    for scp in [json!(format!("User.Read {SCOPE}")), json!(["other", SCOPE])] {
        let mut claims = issuer.claims("erin", AUDIENCE, "");
        claims.as_object_mut().unwrap().remove("scope");
        claims["scp"] = scp;
        let token = key.sign(&claims, None);
        whoami_modern(&serve, &token, 1).await;
    }
    let mut short = issuer.claims("erin", AUDIENCE, "");
    short["scp"] = json!("User.Read");
    let refused = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &bearer(&key.sign(&short, None)))],
            &initialize_body(),
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
}

/// A 2026-07-28 tasks request as `token`'s principal (opted in to the extension).
async fn task_request(serve: &Serve, token: &str, id: u64, method: &str, params: Value) -> Answer {
    let name = params["taskId"]
        .as_str()
        .or(params["name"].as_str())
        .map(str::to_owned);
    serve
        .modern_with(
            json!(id),
            method,
            crate::serve_tasks::opted_in(params),
            name.as_deref(),
            &[("authorization", &bearer(token))],
        )
        .await
}

#[tokio::test]
async fn one_users_task_is_unknown_to_another_who_can_neither_read_answer_nor_cancel_it() {
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let serve = start_with_env(&issuer, &[], &[("FIXTURE_TASKS", "1")]).await;
    let dave = key.sign(&issuer.claims("dave", AUDIENCE, SCOPE), None);
    let erin = key.sign(&issuer.claims("erin", AUDIENCE, SCOPE), None);
    // The child's log shows a cancel that reaches it (the channel the absence is read on).
    let job = task_request(
        &serve,
        &dave,
        0,
        "tools/call",
        json!({"name": "job", "arguments": {"seconds": 30}}),
    )
    .await;
    let job = job.json()["result"]["taskId"].as_str().unwrap().to_owned();
    task_request(&serve, &dave, 1, "tasks/cancel", json!({"taskId": job})).await;
    serve.wait_stderr("fixture: tasks/cancel").await;
    let created = task_request(
        &serve,
        &dave,
        1,
        "tools/call",
        json!({"name": "confirm", "arguments": {}}),
    )
    .await;
    let id = created.json()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.body))
        .to_owned();
    // Dave sees his task wait on its question (the channel is alive).
    let asking = eventually("dave's task waits on its question", async || {
        let got = task_request(&serve, &dave, 2, "tasks/get", json!({"taskId": id})).await;
        if got.json()["result"]["status"] == "input_required" {
            Ok(got.json())
        } else {
            Err(got.body)
        }
    })
    .await;
    let key_of_question = asking["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    // Erin holds the id but not the task: every method says there is no such task.
    let attacks = [
        ("tasks/get", json!({"taskId": id})),
        (
            "tasks/update",
            json!({"taskId": id, "inputResponses": {&key_of_question: {"action": "accept", "content": {"confirm": true}}}}),
        ),
        ("tasks/cancel", json!({"taskId": id})),
    ];
    for (n, (method, params)) in attacks.into_iter().enumerate() {
        let refused = task_request(&serve, &erin, 10 + n as u64, method, params).await;
        assert_eq!(
            refused.json()["error"]["code"],
            -32602,
            "{method}: {}",
            refused.body
        );
        assert!(
            !refused.body.contains("confirm?"),
            "nothing of the task shown: {}",
            refused.body
        );
    }
    // Nor does a listen of hers follow it.
    let listen = serve
        .open_modern_with(
            json!("l-1"),
            "subscriptions/listen",
            crate::serve_tasks::opted_in(json!({"notifications": {"taskIds": [id]}})),
            &[("authorization", &bearer(&erin))],
        )
        .await;
    let mut body = listen.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s| s.contains("acknowledged")).await;
    let ack = &sse_data(&seen)[0];
    assert_eq!(ack["params"]["notifications"], json!({}), "{seen}");
    // Nothing changed: the question still waits, the child never heard of a cancel.
    let still = task_request(&serve, &dave, 20, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(
        still.json()["result"]["status"],
        "input_required",
        "{}",
        still.body
    );
    assert!(still.json()["result"]["inputRequests"][&key_of_question].is_object());
    assert_eq!(
        serve.stderr().matches("fixture: tasks/cancel").count(),
        1,
        "only dave's own cancel reached the child"
    );
    // And dave can still finish it.
    task_request(
        &serve,
        &dave,
        21,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key_of_question: {"action": "accept", "content": {"confirm": true}}}}),
    )
    .await;
    let done = eventually("dave's task completes", async || {
        let got = task_request(&serve, &dave, 22, "tasks/get", json!({"taskId": id})).await;
        if got.json()["result"]["status"] == "completed" {
            Ok(got.json())
        } else {
            Err(got.body)
        }
    })
    .await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "confirmed: true"
    );
}
