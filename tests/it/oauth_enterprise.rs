//! Workload identity (SEP-1933) and enterprise-managed authorization (SEP-990) end to end:
//! one fake host holds the organisation's identity provider (`/idp`: OpenID metadata, a
//! browser login, RFC 8693 token exchange for ID-JAGs), the MCP authorization server
//! (the JWT bearer grant) and two protected MCP servers (`/mcp`, `/mcp2`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::common::*;
use axum::http::Method;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A token request as an endpoint saw it: the path, the form, the Authorization header.
type Seen3 = (String, HashMap<String, String>, Option<String>);

#[derive(Default)]
struct World {
    base: OnceLock<String>,
    /// Every form the token endpoints saw, with the path and the Authorization header.
    forms: Mutex<Vec<Seen3>>,
    /// Assertions the authorization server refuses.
    refused: Mutex<Vec<String>>,
    access: Mutex<Vec<String>>,
    issued: AtomicU32,
    /// The nonce of the IdP's browser login, for its ID token.
    idp_nonce: Mutex<Option<String>>,
    idp_logins: AtomicU32,
    /// The IdP refuses token exchanges (the user's session there ended).
    refuse_exchange: std::sync::atomic::AtomicBool,
}

/// A JWT-shaped token with these claims (the fakes do not check signatures).
fn jwt(claims: Value) -> String {
    let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.c2lnLXNlY3JldA",
        part(json!({"alg": "ES256"})),
        part(claims)
    )
}

use crate::oauth::{form, json_with};

impl World {
    fn base(&self) -> &str {
        self.base.get().unwrap()
    }

    fn idp_token(&self, f: &HashMap<String, String>) -> Reply {
        match f.get("grant_type").map(String::as_str) {
            Some("authorization_code") => {
                self.idp_logins.fetch_add(1, Ordering::SeqCst);
                let nonce = self.idp_nonce.lock().unwrap().clone();
                let id_token = jwt(json!({"sub": "alice", "nonce": nonce,
                    "iss": format!("{}/idp", self.base()), "aud": "mcp-stdio-at-idp",
                    "exp": unix_now() + 3600, "marker": "idtok-secret"}));
                json_with(
                    200,
                    json!({"access_token": "idp-at-secret", "token_type": "Bearer",
                                      "id_token": id_token, "refresh_token": "idp-rt-secret"}),
                )
            }
            Some("urn:ietf:params:oauth:grant-type:token-exchange")
                if self.refuse_exchange.load(Ordering::SeqCst) =>
            {
                json_with(400, json!({"error": "invalid_grant"}))
            }
            Some("urn:ietf:params:oauth:grant-type:token-exchange") => {
                let id_jag = jwt(json!({"typ": "id-jag", "aud": f["audience"],
                    "resource": f["resource"], "marker": "idjag-secret"}));
                json_with(
                    200,
                    json!({"access_token": id_jag, "token_type": "N_A",
                    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}),
                )
            }
            _ => json_with(400, json!({"error": "unsupported_grant_type"})),
        }
    }

    fn as_token(&self, f: &HashMap<String, String>) -> Reply {
        if f.get("grant_type").map(String::as_str) != Some(JWT_BEARER) {
            return json_with(400, json!({"error": "unsupported_grant_type"}));
        }
        if self.refused.lock().unwrap().contains(&f["assertion"]) {
            return json_with(400, json!({"error": "invalid_grant"}));
        }
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("ent-at-secret-{n}");
        self.access.lock().unwrap().push(token.clone());
        json_with(
            200,
            json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}),
        )
    }

    fn handle(&self, seen: &Seen) -> Reply {
        let base = self.base();
        let path = seen.uri.path();
        if seen.method == Method::POST && path.ends_with("/token") {
            let f = form(&seen.body);
            self.forms.lock().unwrap().push((
                path.to_owned(),
                f.clone(),
                seen.header("authorization"),
            ));
            return if path == "/idp/token" {
                self.idp_token(&f)
            } else {
                self.as_token(&f)
            };
        }
        match (seen.method.clone(), path) {
            (Method::GET, "/idp/.well-known/openid-configuration") => json_with(
                200,
                json!({
                "issuer": format!("{base}/idp"), "token_endpoint": format!("{base}/idp/token"),
                "authorization_endpoint": format!("{base}/idp/authorize"),
                "scopes_supported": ["openid", "offline_access"]}),
            ),
            (Method::GET, "/idp/authorize") => {
                let q = form(seen.uri.query().unwrap_or(""));
                *self.idp_nonce.lock().unwrap() = q.get("nonce").cloned();
                crate::oauth::approve(&q, "idp-code-secret")
            }
            (Method::GET, "/.well-known/oauth-authorization-server") => json_with(
                200,
                json!({
                "issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"), "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": [JWT_BEARER],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"]}),
            ),
            (Method::GET, p) if p.starts_with("/.well-known/oauth-protected-resource/") => {
                let server = &p["/.well-known/oauth-protected-resource".len()..];
                json_with(
                    200,
                    json!({"resource": format!("{base}{server}"), "authorization_servers": [base]}),
                )
            }
            (_, "/mcp" | "/mcp2") => {
                let token = seen
                    .header("authorization")
                    .and_then(|a| a.strip_prefix("Bearer ").map(str::to_owned));
                if !token.is_some_and(|t| self.access.lock().unwrap().contains(&t)) {
                    let prm = format!("{base}/.well-known/oauth-protected-resource{path}");
                    return Reply::Json {
                        status: 401,
                        body: "{}".into(),
                        headers: vec![(
                            "www-authenticate",
                            format!(r#"Bearer resource_metadata="{prm}""#),
                        )],
                    };
                }
                basic(seen)
            }
            _ => Reply::Status(404),
        }
    }

    /// The forms one endpoint saw.
    fn forms_at(&self, path: &str) -> Vec<(HashMap<String, String>, Option<String>)> {
        let forms = self.forms.lock().unwrap();
        forms
            .iter()
            .filter(|(p, _, _)| p == path)
            .map(|(_, f, h)| (f.clone(), h.clone()))
            .collect()
    }
}

use crate::oauth_dpop::unix_now;

struct Scene {
    _upstream: Upstream,
    world: Arc<World>,
    home: tempfile::TempDir,
}

impl Scene {
    async fn new() -> Scene {
        let world = Arc::new(World::default());
        let w = world.clone();
        let upstream = Upstream::start(move |seen| w.handle(seen)).await;
        world.base.set(format!("http://{}", upstream.addr)).unwrap();
        let home = tempfile::tempdir().unwrap();
        crate::oauth::browser(home.path()); // writes home/browser.sh
        Scene {
            _upstream: upstream,
            world,
            home,
        }
    }

    fn path(&self, name: &str) -> String {
        self.home.path().join(name).to_str().unwrap().to_owned()
    }

    /// A relay for `server` ("/mcp" or "/mcp2") with these flags, logging at trace level.
    async fn relay(&self, server: &str, args: &[&str], env: &[(&str, &str)]) -> Relay {
        let url = format!("{}{server}", self.world.base());
        let (browser, state) = (self.path("browser.sh"), self.path("state"));
        let mut all_env = vec![
            ("BROWSER", browser.as_str()),
            ("XDG_STATE_HOME", state.as_str()),
        ];
        all_env.extend_from_slice(env);
        let mut all = vec!["--log-level", "trace", "--token-store", "file"];
        all.extend_from_slice(args);
        Relay::start_with_env(&url, &all, &all_env).await
    }
}

/// The MCP authorization server's client secret, from the environment as a host gives it.
const ENTERPRISE_SECRET: (&str, &str) = ("MCP_OAUTH_CLIENT_SECRET", "xaa-secret-at-as");

impl Scene {
    fn idp(&self) -> String {
        format!("{}/idp", self.world.base())
    }

    /// The enterprise flags for the IdP at `idp`.
    fn enterprise_args<'a>(&self, idp: &'a str) -> [&'a str; 6] {
        [
            "--idp-issuer",
            idp,
            "--idp-client-id",
            "mcp-stdio-at-idp",
            "--client-id",
            "xaa-client",
        ]
    }

    /// A relay for `/mcp` that may open a browser: it logs in at the IdP (the browser
    /// stand-in approves), and the handshake succeeds. Returns it, ended.
    async fn browser_login_at_the_idp(&self) -> Relay {
        let idp = self.idp();
        let mut args = self.enterprise_args(&idp).to_vec();
        args.push("--oauth");
        let mut relay = self.relay("/mcp", &args, &[ENTERPRISE_SECRET]).await;
        assert!(relay.initialize().await.get("result").is_some());
        relay.close_stdin();
        relay.wait_exit().await;
        relay
    }
}

/// Logs (the relay runs at trace level) hold none of the secrets; first, that they hold
/// the debug lines at all, so their silence about secrets means something.
fn assert_no_secrets_in_logs(logs: &str) {
    assert!(
        logs.contains("DEBUG") || logs.contains("TRACE"),
        "the logs are live at debug level: {logs}"
    );
    assert_eq!(leaks(logs), Vec::<&str>::new(), "{logs}");
}

/// Secrets of these flows that must never be printed.
fn leaks(text: &str) -> Vec<&'static str> {
    [
        "ent-at-secret",
        "idp-at-secret",
        "idp-rt-secret",
        "idp-code-secret",
        "c2lnLXNlY3JldA",
        "wl-secret",
        "xaa-secret",
    ]
    .into_iter()
    .filter(|s| text.contains(s))
    .collect()
}

#[tokio::test]
async fn a_workload_logs_in_with_the_token_its_file_holds_at_each_token_request() {
    let scene = Scene::new().await;
    let file = scene.path("workload-token");
    let first = jwt(json!({"sub": "ci-job", "n": 1, "k": "wl-secret"}));
    std::fs::write(&file, &first).unwrap();
    let mut relay = scene
        .relay("/mcp", &["--workload-token-file", &file], &[])
        .await;
    assert!(relay.initialize().await.get("result").is_some());
    // The file rotates, and the server forgets the token: the next login reads the new one.
    let second = jwt(json!({"sub": "ci-job", "n": 2, "k": "wl-secret"}));
    std::fs::write(&file, format!("{second}\n")).unwrap();
    scene.world.access.lock().unwrap().clear();
    let listed = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    relay.close_stdin();
    relay.wait_exit().await;
    let forms = scene.world.forms_at("/token");
    assert_eq!(forms.len(), 2, "{forms:?}");
    for ((form, authorization), assertion) in forms.iter().zip([&first, &second]) {
        assert_eq!(form["grant_type"], JWT_BEARER);
        assert_eq!(&form["assertion"], assertion);
        assert_eq!(form["resource"], format!("{}/mcp", scene.world.base()));
        assert!(
            authorization.is_none() && !form.contains_key("client_secret"),
            "no client secret"
        );
    }
    assert_no_secrets_in_logs(&relay.stderr());
}

#[tokio::test]
async fn a_refused_workload_token_ends_in_one_clear_error_and_is_not_presented_again() {
    let scene = Scene::new().await;
    let file = scene.path("workload-token");
    let refused = jwt(json!({"sub": "ci-job", "k": "wl-secret"}));
    scene.world.refused.lock().unwrap().push(refused.clone());
    std::fs::write(&file, &refused).unwrap();
    let mut relay = scene
        .relay("/mcp", &["--workload-token-file", &file], &[])
        .await;
    let answer = relay.initialize().await;
    let said = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        said.contains("did not accept the workload token") && said.contains("invalid_grant"),
        "{answer}"
    );
    // The host asks again: the same token is not sent again, and the same reason is given.
    let again = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("has not changed"),
        "{again}"
    );
    assert_eq!(
        scene.world.forms_at("/token").len(),
        1,
        "one token request in all"
    );
    // A new token in the file is tried.
    std::fs::write(&file, jwt(json!({"sub": "ci-job", "n": 2}))).unwrap();
    let listed = relay.call(json!(2), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    relay.close_stdin();
    relay.wait_exit().await;
    let forms = scene.world.forms_at("/token");
    assert!(
        forms.iter().all(|(f, _)| f["grant_type"] == JWT_BEARER),
        "never another grant"
    );
    assert_no_secrets_in_logs(&relay.stderr());
}

#[tokio::test]
async fn an_id_token_file_is_exchanged_for_an_id_jag_that_the_authorization_server_takes() {
    let scene = Scene::new().await;
    let base = scene.world.base().to_owned();
    let id_token_file = scene.path("id-token");
    let id_token = jwt(json!({"sub": "alice", "k": "xaa-secret"}));
    std::fs::write(&id_token_file, &id_token).unwrap();
    let idp = format!("{base}/idp");
    let args = [
        "--idp-issuer",
        &idp,
        "--idp-client-id",
        "mcp-stdio-at-idp",
        "--idp-id-token-file",
        &id_token_file,
        "--client-id",
        "xaa-client",
    ];
    let env = [("MCP_OAUTH_CLIENT_SECRET", "xaa-secret-at-as")];
    let mut relay = scene.relay("/mcp", &args, &env).await;
    assert!(relay.initialize().await.get("result").is_some());
    relay.close_stdin();
    relay.wait_exit().await;
    let exchanges = scene.world.forms_at("/idp/token");
    assert_eq!(exchanges.len(), 1);
    let (exchange, _) = &exchanges[0];
    assert_eq!(
        exchange["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(
        exchange["requested_token_type"],
        "urn:ietf:params:oauth:token-type:id-jag"
    );
    assert_eq!(
        exchange["subject_token_type"],
        "urn:ietf:params:oauth:token-type:id_token"
    );
    assert_eq!(exchange["subject_token"], id_token);
    assert_eq!(
        exchange["audience"], base,
        "the MCP authorization server's issuer"
    );
    assert_eq!(exchange["resource"], format!("{base}/mcp"));
    assert_eq!(exchange["client_id"], "mcp-stdio-at-idp");
    let grants = scene.world.forms_at("/token");
    assert_eq!(grants.len(), 1);
    let (grant, authorization) = &grants[0];
    assert_eq!(grant["grant_type"], JWT_BEARER);
    let claims = grant["assertion"].split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
    assert_eq!(
        claims["marker"], "idjag-secret",
        "the ID-JAG the IdP issued, as is"
    );
    let basic = format!("Basic {}", STANDARD.encode("xaa-client:xaa-secret-at-as"));
    assert_eq!(
        authorization.as_deref(),
        Some(basic.as_str()),
        "the client authenticates"
    );
    let stderr = relay.stderr();
    assert_no_secrets_in_logs(&stderr);
    assert!(!stderr.contains(&id_token), "no ID token");
}

#[tokio::test]
async fn one_browser_login_at_the_identity_provider_serves_every_server_of_the_organisation() {
    let scene = Scene::new().await;
    let relay = scene.browser_login_at_the_idp().await;
    let idp = scene.idp();
    let args = scene.enterprise_args(&idp);
    let env = [ENTERPRISE_SECRET];
    assert_eq!(scene.world.idp_logins.load(Ordering::SeqCst), 1);
    // A second server of the organisation, in a relay that may not open a browser.
    let mut second = scene.relay("/mcp2", &args, &env).await;
    assert!(second.initialize().await.get("result").is_some());
    second.close_stdin();
    second.wait_exit().await;
    assert_eq!(
        scene.world.idp_logins.load(Ordering::SeqCst),
        1,
        "no second IdP login"
    );
    let exchanges = scene.world.forms_at("/idp/token");
    let resources: Vec<&str> = exchanges
        .iter()
        .filter_map(|(f, _)| f.get("resource").map(String::as_str))
        .collect();
    assert_eq!(resources.len(), 2, "{exchanges:?}");
    assert!(resources[1].ends_with("/mcp2"));
    let status = std::process::Command::new(binary())
        .args(["status", "--token-store", "file"])
        .env("XDG_STATE_HOME", scene.path("state"))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.contains(&format!("identity provider {idp} client=mcp-stdio-at-idp")),
        "{status}"
    );
    assert_eq!(leaks(&status), Vec::<&str>::new(), "{status}");
    let stored = std::fs::read_to_string(scene.path("state/mcp-stdio/tokens.json")).unwrap();
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert!(
        stored["idp_logins"]
            .as_object()
            .is_some_and(|l| l.len() == 1),
        "{stored}"
    );
    for stderr in [relay.stderr(), second.stderr()] {
        assert_no_secrets_in_logs(&stderr);
    }
}

#[tokio::test]
async fn a_credential_file_over_max_credential_file_is_refused_naming_the_flag_not_the_content() {
    let scene = Scene::new().await;
    let file = scene.path("workload-token");
    std::fs::write(&file, jwt(json!({"sub": "ci-job", "k": "wl-secret"}))).unwrap();
    let args = [
        "--workload-token-file",
        &file,
        "--max-credential-file",
        "16",
    ];
    let mut relay = scene.relay("/mcp", &args, &[]).await;
    let answer = relay.initialize().await;
    let said = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        said.contains("--max-credential-file (16 bytes)"),
        "{answer}"
    );
    relay.close_stdin();
    relay.wait_exit().await;
    assert!(scene.world.forms_at("/token").is_empty(), "nothing sent");
    assert_no_secrets_in_logs(&(said + &relay.stderr()));
}

#[tokio::test]
async fn a_kept_id_token_the_idp_no_longer_takes_is_forgotten_so_the_next_login_starts_there() {
    let scene = Scene::new().await;
    let first = scene.browser_login_at_the_idp().await;
    let idp = scene.idp();
    let args = scene.enterprise_args(&idp);
    let env = [ENTERPRISE_SECRET];
    scene.world.refuse_exchange.store(true, Ordering::SeqCst);
    let mut second = scene.relay("/mcp2", &args, &env).await;
    let answer = second.initialize().await;
    second.close_stdin();
    second.wait_exit().await;
    let said = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The refusal ended the kept login; the relay's next attempt says to log in again.
    assert!(
        said.contains("no usable login at the identity provider"),
        "{answer}"
    );
    let exchanges = scene.world.forms_at("/idp/token");
    let exchanges = exchanges
        .iter()
        .filter(|(f, _)| f["grant_type"].ends_with("token-exchange"));
    assert_eq!(
        exchanges.count(),
        2,
        "one per relay, the second refused, none after"
    );
    let stored = std::fs::read_to_string(scene.path("state/mcp-stdio/tokens.json")).unwrap();
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert!(stored.get("idp_logins").is_none(), "forgotten: {stored}");
    assert_no_secrets_in_logs(&(said + &first.stderr() + &second.stderr()));
}
