//! What the policy sees of a user the embedded authorization server signed in: the user
//! and the groups the authenticating proxy said at consent (`--trusted-user-header`,
//! `--trusted-groups-header`), kept with the grant through refreshes; and the hints a
//! tool's annotations carry beyond read-only and destructive.

use serde_json::{Value, json};

use crate::common::serve::*;
use crate::common::signin::*;
use crate::serve_oauth::{no_secret_in_the_audit_log, start_as};

const POLICY: &str = r#"
[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"

[[rules]]
name = "whoami-is-for-on-call"
phase = "call"
effect = "deny"
when = "method == 'tools/call' && tool.name == 'whoami' && !('on call' in principal.groups)"
message = "only the on-call group may ask which child serves it"

[[rules]]
name = "idempotent-or-read-only"
phase = "call"
effect = "require"
when = "method != 'tools/call' || tool.annotations.idempotentHint || tool.annotations.readOnlyHint"
message = "only tools that may safely be retried"

[[rules]]
name = "known-users"
phase = "call"
effect = "allow"
when = "principal.user in ['ann', 'ben']"
"#;

/// serve behind a proxy that says the user and the groups, with `POLICY`.
async fn start(dir: &tempfile::TempDir) -> Serve {
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    start_as(
        dir,
        &[
            "--trusted-user-header",
            "X-Forwarded-User",
            "--trusted-groups-header",
            "X-Forwarded-Groups",
            "--trusted-proxy",
            "127.0.0.1/32",
            "--policy",
            policy.to_str().unwrap(),
        ],
    )
    .await
}

/// Signs `user` in through the proxy with `groups` (the header as sent): the tokens.
async fn sign_in_as(serve: &Serve, client_id: &str, user: &str, groups: Option<&str>) -> Tokens {
    let pkce = Pkce::new();
    let mut headers = vec![("x-forwarded-user", user)];
    headers.extend(groups.map(|g| ("x-forwarded-groups", g)));
    let approved = consent(
        serve,
        &authorize_path(client_id, &pkce, &[]),
        &headers,
        "approve",
    )
    .await;
    let code = location_param(&approved, "code")
        .unwrap_or_else(|| panic!("no code: {} {}", approved.status, approved.body));
    tokens(&redeem(serve, client_id, &code, &pkce.verifier).await)
}

/// A 2026-era `tools/call` of `tool` as `access`: the JSON-RPC answer.
async fn call(serve: &Serve, access: &str, id: i64, tool: &str) -> Value {
    let bearer = format!("Bearer {access}");
    let answer = serve
        .modern_with(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": {"text": "hi"}}),
            Some(tool),
            &[("authorization", &bearer)],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()
}

fn refused_by(answer: &Value) -> Option<String> {
    (answer["result"]["isError"] == true).then(|| {
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    })
}

#[tokio::test]
async fn the_proxys_groups_reach_the_policy_and_outlive_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&dir).await;
    let client_id = register(&serve).await;
    let ann = sign_in_as(&serve, &client_id, "ann", Some("staff, on call")).await;
    let ben = sign_in_as(&serve, &client_id, "ben", Some("staff")).await;

    let allowed = call(&serve, &ann.access, 1, "whoami").await;
    assert_eq!(refused_by(&allowed), None, "ann is on call: {allowed}");
    let refused = call(&serve, &ben.access, 2, "whoami").await;
    let why = refused_by(&refused).unwrap_or_else(|| panic!("ben is not on call: {refused}"));
    assert!(
        why.contains("whoami-is-for-on-call") && why.contains("on-call group"),
        "{why}"
    );

    // A refresh keeps what the proxy said at consent.
    let renewed = tokens(&refresh(&serve, &client_id, &ann.refresh).await);
    let again = call(&serve, &renewed.access, 3, "whoami").await;
    assert_eq!(refused_by(&again), None, "{again}");

    // principal.user is the signed-in name: an unknown user is refused by default.
    let eve = sign_in_as(&serve, &client_id, "eve", Some("on call")).await;
    let nobody = call(&serve, &eve.access, 4, "whoami").await;
    assert!(
        refused_by(&nobody).is_some() || nobody["error"].is_object(),
        "no allow rule admits eve: {nobody}"
    );
    no_secret_in_the_audit_log(
        &dir,
        &[&ann.access, &ann.refresh, &renewed.access, &ben.access],
    )
    .await;
}

#[tokio::test]
async fn idempotent_and_read_only_hints_reach_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&dir).await;
    let client_id = register(&serve).await;
    let ann = sign_in_as(&serve, &client_id, "ann", Some("on call")).await;
    // whoami is idempotent, echo read-only, slow neither.
    for (id, tool) in [(1, "whoami"), (2, "echo")] {
        let answer = call(&serve, &ann.access, id, tool).await;
        assert_eq!(refused_by(&answer), None, "{tool}: {answer}");
    }
    let slow = call(&serve, &ann.access, 3, "slow").await;
    let why = refused_by(&slow).unwrap_or_else(|| panic!("slow is neither: {slow}"));
    assert!(why.contains("idempotent-or-read-only"), "{why}");
}

#[tokio::test]
async fn a_repeated_groups_header_signs_nobody_in_and_a_stranger_cannot_add_groups() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&dir).await;
    let client_id = register(&serve).await;
    // The page is shown (the user is known), but approving with the groups header twice
    // is refused: a proxy that appends would let the client add its own.
    let pkce = Pkce::new();
    let path = authorize_path(&client_id, &pkce, &[]);
    let page = serve
        .send("GET", &path, &[("x-forwarded-user", "ben")], "")
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let mut fields = form_fields(&page.body);
    fields.push(("decision".into(), "approve".into()));
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let twice = serve
        .send_form(
            "/authorize",
            &[
                ("x-forwarded-user", "ben"),
                ("x-forwarded-groups", "on call"),
                ("x-forwarded-groups", "staff"),
            ],
            &pairs,
        )
        .await;
    assert_eq!(twice.status, 400, "{}", twice.body);
    assert!(
        twice.body.contains("X-Forwarded-Groups") || twice.body.contains("x-forwarded-groups"),
        "{}",
        twice.body
    );
    assert!(location_param(&twice, "code").is_none());
    serve.wait_stderr("outcome=\"ambiguous_groups\"").await;
}
