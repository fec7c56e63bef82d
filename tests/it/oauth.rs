//! OAuth end to end: a fake MCP server that wants a Bearer token, its authorization server
//! (metadata, registration, authorize, token with PKCE and rotation) on the same host, and a
//! `$BROWSER` stand-in that follows the authorization redirect like a user would.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use crate::common::*;
use axum::http::Method;
use base64::Engine;
use serde_json::{Value, json};

/// What an authorization code was issued for.
struct Issued {
    code_challenge: String,
    redirect_uri: String,
    scope: String,
}

#[derive(Default)]
pub struct World {
    base: OnceLock<String>,
    codes: Mutex<HashMap<String, Issued>>,
    access: Mutex<HashSet<String>>,
    refresh: Mutex<HashSet<String>>,
    /// The scope each access and refresh token was issued with.
    scope_of: Mutex<HashMap<String, String>>,
    issued: Mutex<u32>,
    registrations: Mutex<Vec<Value>>,
    pub token_forms: Mutex<Vec<HashMap<String, String>>>,
    authorize_queries: Mutex<Vec<HashMap<String, String>>>,
    /// Access tokens live this long (seconds).
    expires_in: Mutex<u64>,
    /// Device-code polls seen so far.
    device_polls: Mutex<u32>,
    device_poll_times: Mutex<Vec<std::time::Instant>>,
    device_requests: Mutex<Vec<HashMap<String, String>>>,
    /// The authorization server lists only the client credentials grant.
    pub machines_only: std::sync::atomic::AtomicBool,
    pub token_headers: Mutex<Vec<Option<String>>>,
    revocations: Mutex<Vec<HashMap<String, String>>>,
    /// The authorization server the protected resource metadata names: "" or "/as2".
    current_as: Mutex<String>,
}

impl World {
    fn base(&self) -> &str {
        self.base.get().unwrap()
    }

    fn issue(&self, scope: &str) -> Value {
        let mut n = self.issued.lock().unwrap();
        *n += 1;
        let (access, refresh) = (format!("at-secret-{n}"), format!("rt-secret-{n}"));
        self.access.lock().unwrap().insert(access.clone());
        self.refresh.lock().unwrap().insert(refresh.clone());
        let mut scopes = self.scope_of.lock().unwrap();
        scopes.insert(access.clone(), scope.to_owned());
        scopes.insert(refresh.clone(), scope.to_owned());
        json!({"access_token": access, "token_type": "Bearer", "refresh_token": refresh,
               "expires_in": *self.expires_in.lock().unwrap(), "scope": scope})
    }

    fn scope_of(&self, token: &str) -> String {
        self.scope_of
            .lock()
            .unwrap()
            .get(token)
            .cloned()
            .unwrap_or_default()
    }

    fn revoke_all_access(&self) {
        self.access.lock().unwrap().clear();
    }
}

pub(crate) fn form(body: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

pub(crate) fn json_with(status: u16, body: Value) -> Reply {
    Reply::Json {
        status,
        body: body.to_string(),
        headers: vec![],
    }
}

fn handle(world: &World, seen: &Seen) -> Reply {
    let server = world.base();
    // A second authorization server lives under /as2 (for the migration test): the same
    // handlers, with the issuer and endpoints under the prefix.
    let full = seen.uri.path();
    let (prefix, path) = match full {
        "/.well-known/oauth-authorization-server/as2" => {
            ("/as2", "/.well-known/oauth-authorization-server")
        }
        p if p.starts_with("/as2/") => ("/as2", &p[4..]),
        p => ("", p),
    };
    let issuer = format!("{server}{prefix}");
    let base = issuer.as_str();
    match (seen.method.clone(), path) {
        (Method::GET, "/.well-known/oauth-protected-resource/mcp") => json_with(
            200,
            json!({"resource": format!("{server}/mcp"),
                   "authorization_servers": [format!("{server}{}", world.current_as.lock().unwrap())],
                   "scopes_supported": ["mcp:tools"]}),
        ),
        (Method::GET, "/.well-known/oauth-authorization-server")
            if world
                .machines_only
                .load(std::sync::atomic::Ordering::SeqCst) =>
        {
            json_with(
                200,
                json!({"issuer": base,
                       "authorization_endpoint": format!("{base}/authorize"),
                       "token_endpoint": format!("{base}/token"),
                       "code_challenge_methods_supported": ["S256"],
                       "grant_types_supported": ["client_credentials"],
                       "token_endpoint_auth_methods_supported": ["client_secret_basic"]}),
            )
        }
        (Method::GET, "/.well-known/oauth-authorization-server") => json_with(
            200,
            json!({"issuer": base,
                   "authorization_endpoint": format!("{base}/authorize"),
                   "token_endpoint": format!("{base}/token"),
                   "registration_endpoint": format!("{base}/register"),
                   "code_challenge_methods_supported": ["S256"],
                   "token_endpoint_auth_methods_supported": ["none"],
                   "device_authorization_endpoint": format!("{base}/device"),
                   "revocation_endpoint": format!("{base}/revoke"),
                   "authorization_response_iss_parameter_supported": true}),
        ),
        (Method::POST, "/register") => {
            let mut body: Value = serde_json::from_str(&seen.body).unwrap();
            body["registered_at"] = json!(prefix);
            world.registrations.lock().unwrap().push(body.clone());
            json_with(
                201,
                json!({"client_id": format!("client-1{prefix}"), "redirect_uris": body["redirect_uris"],
                       "token_endpoint_auth_method": "none"}),
            )
        }
        (Method::POST, "/revoke") => {
            world.revocations.lock().unwrap().push(form(&seen.body));
            Reply::Status(200)
        }
        (Method::POST, "/device") => {
            world.device_requests.lock().unwrap().push(form(&seen.body));
            json_with(
                200,
                json!({"device_code": "device-code-secret", "user_code": "WDJB-MJHT",
                       "verification_uri": format!("{base}/activate"), "expires_in": 60, "interval": 1}),
            )
        }
        (Method::GET, "/authorize") => {
            let query = form(seen.uri.query().unwrap_or(""));
            world.authorize_queries.lock().unwrap().push(query.clone());
            let code = format!("code-secret-{}", query["state"].len());
            world.codes.lock().unwrap().insert(
                code.clone(),
                Issued {
                    code_challenge: query["code_challenge"].clone(),
                    redirect_uri: query["redirect_uri"].clone(),
                    scope: query.get("scope").cloned().unwrap_or_default(),
                },
            );
            let location = format!(
                "{}?code={code}&state={}&iss={}",
                query["redirect_uri"],
                query["state"],
                url::form_urlencoded::byte_serialize(base.as_bytes()).collect::<String>()
            );
            Reply::Json {
                status: 302,
                body: String::new(),
                headers: vec![("location", location)],
            }
        }
        (Method::POST, "/token") => {
            let f = form(&seen.body);
            world.token_forms.lock().unwrap().push(f.clone());
            world
                .token_headers
                .lock()
                .unwrap()
                .push(seen.header("authorization"));
            match f.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    let Some(issued) = world.codes.lock().unwrap().remove(&f["code"]) else {
                        return json_with(400, json!({"error": "invalid_grant"}));
                    };
                    let digest = aws_lc_rs::digest::digest(
                        &aws_lc_rs::digest::SHA256,
                        f["code_verifier"].as_bytes(),
                    );
                    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
                    if computed != issued.code_challenge || issued.redirect_uri != f["redirect_uri"]
                    {
                        return json_with(400, json!({"error": "invalid_grant"}));
                    }
                    json_with(200, world.issue(&issued.scope))
                }
                Some("urn:ietf:params:oauth:grant-type:device_code") => {
                    let mut polls = world.device_polls.lock().unwrap();
                    *polls += 1;
                    world
                        .device_poll_times
                        .lock()
                        .unwrap()
                        .push(std::time::Instant::now());
                    if f["device_code"] != "device-code-secret" {
                        return json_with(400, json!({"error": "invalid_grant"}));
                    }
                    match *polls {
                        1 => return json_with(400, json!({"error": "authorization_pending"})),
                        2 => return json_with(400, json!({"error": "slow_down"})),
                        _ => {}
                    }
                    json_with(200, world.issue("mcp:tools"))
                }
                Some("client_credentials") => json_with(200, world.issue("mcp:tools")),
                Some("refresh_token") => {
                    if !world.refresh.lock().unwrap().remove(&f["refresh_token"]) {
                        return json_with(400, json!({"error": "invalid_grant"}));
                    }
                    json_with(200, world.issue(&world.scope_of(&f["refresh_token"])))
                }
                _ => json_with(400, json!({"error": "unsupported_grant_type"})),
            }
        }
        (_, "/mcp") => {
            let token = seen
                .header("authorization")
                .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned));
            let wants_write = seen.body.contains(r#""name":"write""#);
            if let Some(token) = token.as_deref()
                && world.access.lock().unwrap().contains(token)
                && wants_write
                && !world.scope_of(token).split(' ').any(|s| s == "mcp:write")
            {
                return Reply::Json {
                    status: 403,
                    body: json!({"error": "insufficient_scope"}).to_string(),
                    headers: vec![(
                        "www-authenticate",
                        format!(
                            r#"Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                        ),
                    )],
                };
            }
            if !token.is_some_and(|t| world.access.lock().unwrap().contains(&t)) {
                return Reply::Json {
                    status: 401,
                    body: json!({"error": "invalid_token"}).to_string(),
                    headers: vec![(
                        "www-authenticate",
                        format!(
                            r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", scope="mcp:tools""#
                        ),
                    )],
                };
            }
            let request = seen.json();
            match request["method"].as_str() {
                Some("tools/list") => json_reply(result_for(
                    &request,
                    json!({"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}),
                )),
                Some("tools/call") => json_reply(result_for(
                    &request,
                    json!({"content": [{"type": "text", "text": "signed in"}]}),
                )),
                _ => basic(seen),
            }
        }
        _ => Reply::Status(404),
    }
}

/// An authorization endpoint's approval: back to the query's `redirect_uri` with `code` and
/// the query's `state` (what a browser follows after the user says yes).
pub(crate) fn approve(query: &HashMap<String, String>, code: &str) -> Reply {
    let location = format!(
        "{}?code={code}&state={}",
        query["redirect_uri"], query["state"]
    );
    Reply::Json {
        status: 302,
        body: String::new(),
        headers: vec![("location", location)],
    }
}

/// The protected MCP server and its authorization server; tokens live `expires_in` s.
pub async fn world(expires_in: u64) -> (Upstream, Arc<World>) {
    let world = Arc::new(World::default());
    *world.expires_in.lock().unwrap() = expires_in;
    let w = world.clone();
    let upstream = Upstream::start(move |seen| handle(&w, seen)).await;
    world.base.set(format!("http://{}", upstream.addr)).unwrap();
    (upstream, world)
}

/// A fake world, a home for the relay's token store, and a browser that approves.
pub struct Scene {
    pub upstream: Upstream,
    pub world: Arc<World>,
    pub state: std::path::PathBuf,
    browser: String,
    _home: tempfile::TempDir,
}

impl Scene {
    pub async fn new(expires_in: u64) -> Scene {
        let (upstream, world) = world(expires_in).await;
        let home = tempfile::tempdir().unwrap();
        Scene {
            upstream,
            world,
            state: home.path().join("state"),
            browser: browser(home.path()),
            _home: home,
        }
    }

    /// A relay for the world's server, with this scene's browser and token store.
    async fn relay(&self, args: &[&str]) -> Relay {
        let env = [
            ("BROWSER", self.browser.as_str()),
            ("XDG_STATE_HOME", self.state.to_str().unwrap()),
        ];
        Relay::start_with_env(&self.upstream.url, args, &env).await
    }

    /// The binary as a terminal command with this scene's browser and token store.
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        terminal(&self.browser, &self.state, args)
    }
}

/// A `$BROWSER` that follows the authorization redirect to the callback, as a user's
/// browser would after they approve.
pub(crate) fn browser(dir: &std::path::Path) -> String {
    let path = dir.join("browser.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\nexec python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).read()' \"$1\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs the binary as a terminal command with this browser and token store; returns
/// (exit code, stdout, stderr).
fn terminal(browser: &str, state: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(binary())
        .args(args)
        .env("BROWSER", browser)
        .env("XDG_STATE_HOME", state)
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/mcp-stdio-test-bus",
        )
        .env_remove("MCP_BEARER_TOKEN")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn secrets_in(text: &str) -> Vec<&'static str> {
    ["at-secret", "rt-secret", "code-secret", "code_verifier"]
        .into_iter()
        .filter(|s| text.contains(s))
        .collect()
}

#[tokio::test]
async fn relay_with_oauth_logs_in_through_the_browser_then_relays() {
    let (upstream, world) = world(3600).await;
    let home = tempfile::tempdir().unwrap();
    let browser = browser(home.path());
    let state = home.path().join("state");
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &["--oauth", "--log-level", "trace"],
        &[
            ("BROWSER", &browser),
            ("XDG_STATE_HOME", state.to_str().unwrap()),
        ],
    )
    .await;
    let answer = relay.initialize().await;
    assert!(answer.get("result").is_some(), "{answer}");
    let listed = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");

    // Registration: a native client with a loopback redirect.
    let registration = world.registrations.lock().unwrap()[0].clone();
    assert_eq!(registration["application_type"], "native");
    assert!(
        registration["redirect_uris"][0]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    // The authorization request: PKCE S256, resource = the server URL, the challenge's scope.
    let query = world.authorize_queries.lock().unwrap()[0].clone();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["resource"], upstream.url);
    assert_eq!(query["scope"], "mcp:tools");
    assert!(!query.contains_key("prompt"));
    let exchange = world.token_forms.lock().unwrap()[0].clone();
    assert_eq!(exchange["resource"], upstream.url);

    // The grant is stored privately, and no secret reached the logs even at trace level.
    let file = state.join("mcp-stdio").join("tokens.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    relay.close_stdin();
    relay.wait_exit().await;
    let stderr = relay.stderr();
    assert!(
        stderr.contains("to log in to"),
        "the URL is shown for manual use: {stderr}"
    );
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");
}

#[tokio::test]
async fn a_refused_token_is_refreshed_once_and_the_rotated_one_is_stored() {
    let scene = Scene::new(3600).await;
    let (upstream, world, state) = (&scene.upstream, &scene.world, &scene.state);
    // A whole login and refresh at trace level: no secret may reach stderr.
    let mut relay = scene.relay(&["--oauth", "--log-level", "trace"]).await;
    relay.initialize().await;
    world.revoke_all_access();
    let listed = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    let grants = world.token_forms.lock().unwrap().clone();
    assert_eq!(grants.len(), 2, "one code exchange, one refresh");
    assert_eq!(grants[1]["grant_type"], "refresh_token");
    assert_eq!(
        grants[1]["resource"], upstream.url,
        "refresh carries resource"
    );
    assert_eq!(
        world.registrations.lock().unwrap().len(),
        1,
        "no second login"
    );
    let stored = std::fs::read_to_string(state.join("mcp-stdio").join("tokens.json")).unwrap();
    assert!(
        stored.contains("rt-secret-2") && !stored.contains("rt-secret-1"),
        "rotated"
    );
    relay.close_stdin();
    relay.wait_exit().await;
    let stderr = relay.stderr();
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG"),
        "trace logging was on"
    );
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");
}

#[tokio::test]
async fn without_oauth_a_dead_login_tells_the_host_to_run_login() {
    let (upstream, _world) = world(3600).await;
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &[],
        &[("XDG_STATE_HOME", state.to_str().unwrap())],
    )
    .await;
    let answer = relay
        .call(json!(0), "initialize", host_initialize_params())
        .await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("mcp-stdio login"), "{message}");
    assert_eq!(answer["error"]["data"]["httpStatus"], 401);
}

// Multi-threaded: the commands run as blocking child processes while the fake servers
// keep answering on the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_then_status_token_and_logout_from_a_terminal() {
    let scene = Scene::new(3600).await;
    let (world, state) = (&scene.world, &scene.state);
    let run = |args: &[&str]| scene.run(args);
    let url = scene.upstream.url.clone();
    let (code, stdout, stderr) = run(&["login", &url, "--log-level", "trace"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("logged in to"), "{stderr}");
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");

    let (code, stdout, _) = run(&["status", "--json"]);
    assert_eq!(code, 0);
    let status: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(status[0]["issuer"], world.base());
    assert_eq!(status[0]["refresh_token"], true);
    assert_eq!(secrets_in(&stdout), Vec::<&str>::new(), "{stdout}");

    // The relay, without --oauth, uses the stored login.
    let mut relay =
        Relay::start_with_env(&url, &[], &[("XDG_STATE_HOME", state.to_str().unwrap())]).await;
    assert!(relay.initialize().await.get("result").is_some());
    drop(relay);

    let (code, stdout, stderr) = run(&["token", &url]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.trim().starts_with("at-secret-"), "{stdout}");
    assert!(stderr.contains("keep it out of logs"));

    let (code, _, stderr) = run(&["logout", &url]);
    assert_eq!(code, 0);
    assert!(
        stderr.contains("removed 1") && stderr.contains("1 revoked"),
        "{stderr}"
    );
    let revoked = world.revocations.lock().unwrap()[0].clone();
    assert_eq!(revoked["token_type_hint"], "refresh_token");
    assert!(revoked["token"].starts_with("rt-secret-"));
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");
    let (_, stdout, _) = run(&["status"]);
    assert!(stdout.contains("no stored logins"), "{stdout}");
}

// Multi-threaded: the commands run as blocking child processes while the fake servers
// keep answering on the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_with_oauth_logs_in_first_and_the_python_tools_check_form_works() {
    let scene = Scene::new(3600).await;
    let world = &scene.world;
    let run = |args: &[&str]| scene.run(args);
    let url = scene.upstream.url.clone();

    // Without --oauth and no stored login: the server answered, but the check says how to
    // get in, and no login was started.
    let (code, stdout, stderr) = run(&["check", &url, "--json"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["auth"]["required"], true);
    let hint = report["hint"].as_str().unwrap();
    assert!(
        hint.contains(&format!("mcp-stdio login {url}")) && hint.contains("--oauth"),
        "{hint}"
    );
    assert_eq!(*world.issued.lock().unwrap(), 0, "no login without --oauth");

    // With --oauth: a browser login first, then the whole report, and no secret anywhere.
    let (code, stdout, stderr) = run(&["check", &url, "--oauth", "--json", "--log-level", "trace"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["auth"]["credential"], "new-login", "{report}");
    assert_eq!(report["auth"]["login"]["issuer"], world.base(), "{report}");
    assert_eq!(report["auth"]["login"]["refreshable"], true);
    assert_eq!(report["server"]["name"], "fake", "{report}");
    let steps = crate::check::step_names(&report);
    assert!(steps.contains(&"login"), "{steps:?}");
    assert_eq!(*world.issued.lock().unwrap(), 1, "one login");
    assert!(stderr.contains("DEBUG"), "debug logging was on: {stderr}");
    assert_eq!(secrets_in(&stdout), Vec::<&str>::new(), "{stdout}");
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");

    // The login was kept: a plain check uses it.
    let (code, stdout, _) = run(&["check", &url, "--json"]);
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["auth"]["credential"], "stored-login");
    assert_eq!(*world.issued.lock().unwrap(), 1, "no second login");

    // The Python tool's form: relay flags plus --check print the text report; its
    // deprecated --test still works and says so.
    let (code, stdout, stderr) = run(&[
        "--check",
        &url,
        "--max-in-flight",
        "8",
        "--log-level",
        "debug",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!("mcp-stdio check {url}")),
        "{stdout}"
    );
    assert!(stdout.contains("used: stored-login"), "{stdout}");
    assert!(stderr.contains("DEBUG"), "debug logging was on: {stderr}");
    assert!(!stderr.contains("deprecated"), "{stderr}");
    let (code, stdout, stderr) = run(&["--test", &url]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("--test is deprecated"), "{stderr}");
    assert!(stdout.contains("answered"), "{stdout}");

    // --check --oauth with an empty store logs in first, as the Python tool does.
    let fresh = scene.state.with_file_name("fresh-state");
    let (code, stdout, stderr) = terminal(&scene.browser, &fresh, &["--check", "--oauth", &url]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("used: new-login"), "{stdout}");
    assert_eq!(*world.issued.lock().unwrap(), 2);
    assert_eq!(secrets_in(&stdout), Vec::<&str>::new(), "{stdout}");

    // A login and a static credential at once is a usage error, in both forms.
    for args in [
        &["check", &url, "--oauth", "--bearer-token", "at-secret-x"][..],
        &["--check", "--oauth", "--bearer-token", "at-secret-x", &url][..],
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("choose one way to authenticate"),
            "{stderr}"
        );
        assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");
    }
}

#[tokio::test]
async fn two_relays_starting_together_share_one_login_and_one_refresh() {
    let (upstream, world) = world(3600).await;
    let home = tempfile::tempdir().unwrap();
    let browser = browser(home.path());
    let state = home.path().join("state");
    let env = [
        ("BROWSER", browser.as_str()),
        ("XDG_STATE_HOME", state.to_str().unwrap()),
    ];
    let mut first = Relay::start_with_env(&upstream.url, &["--oauth"], &env).await;
    let mut second = Relay::start_with_env(&upstream.url, &["--oauth"], &env).await;
    let (a, b) = tokio::join!(first.initialize(), second.initialize());
    assert!(
        a.get("result").is_some() && b.get("result").is_some(),
        "{a} {b}"
    );
    assert_eq!(
        world.authorize_queries.lock().unwrap().len(),
        1,
        "one browser login"
    );
    assert_eq!(world.registrations.lock().unwrap().len(), 1);

    world.revoke_all_access();
    let (a, b) = tokio::join!(
        first.call(json!(1), "tools/list", json!({})),
        second.call(json!(1), "tools/list", json!({}))
    );
    assert!(
        a.get("result").is_some() && b.get("result").is_some(),
        "{a} {b}"
    );
    let refreshes = world
        .token_forms
        .lock()
        .unwrap()
        .iter()
        .filter(|f| f["grant_type"] == "refresh_token")
        .count();
    assert_eq!(
        refreshes, 1,
        "the second relay adopted the first one's refresh"
    );
}

#[tokio::test]
async fn logins_of_the_python_tool_are_taken_over_on_first_use() {
    let (upstream, world) = world(3600).await;
    world.access.lock().unwrap().insert("py-at-secret".into());
    let home = tempfile::tempdir().unwrap();
    let python = home.path().join(".config").join("mcp-stdio");
    std::fs::create_dir_all(&python).unwrap();
    std::fs::write(
        python.join("tokens.json"),
        json!({ upstream.url.clone(): {
            "access_token": "py-at-secret", "token_type": "Bearer", "expires_at": null,
            "refresh_token": "py-rt-secret", "scope": "mcp:tools", "client_id": "client-1",
            "token_endpoint": format!("{}/token", world.base()), "issuer": world.base(),
            "token_endpoint_auth_method": "none", "no_resource_indicator": false,
            "oauth_resource": null
        }})
        .to_string(),
    )
    .unwrap();
    let state = home.path().join("state");
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("XDG_STATE_HOME", state.to_str().unwrap()),
    ];
    let mut relay = Relay::start_with_env(&upstream.url, &[], &env).await;
    let answer = relay.initialize().await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        world.authorize_queries.lock().unwrap().is_empty(),
        "no new login"
    );
    let ours = std::fs::read_to_string(state.join("mcp-stdio").join("tokens.json")).unwrap();
    assert!(
        ours.contains("py-rt-secret"),
        "saved as ours, so the import happens once"
    );
    relay.close_stdin();
    relay.wait_exit().await;
    assert!(
        relay
            .stderr()
            .contains("took over the logins of the Python mcp-stdio")
    );
    assert_eq!(secrets_in(&relay.stderr()), Vec::<&str>::new());
}

#[tokio::test]
async fn the_device_flow_shows_a_code_and_polls_until_approved() {
    let (upstream, world) = world(3600).await;
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &["--oauth-device", "--log-level", "trace"],
        &[("XDG_STATE_HOME", state.to_str().unwrap())],
    )
    .await;
    let answer = relay.initialize().await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(
        *world.device_polls.lock().unwrap(),
        3,
        "pending, slow down, then approved"
    );
    // slow_down adds 5 s to the 1 s interval for every later poll (RFC 8628 §3.5).
    let times = world.device_poll_times.lock().unwrap().clone();
    assert!(
        times[2] - times[1] >= std::time::Duration::from_secs(6),
        "polled again {:?} after slow_down",
        times[2] - times[1]
    );
    let request = world.device_requests.lock().unwrap()[0].clone();
    assert_eq!(request["resource"], upstream.url);
    let registration = world.registrations.lock().unwrap()[0].clone();
    assert_eq!(
        registration["grant_types"][0],
        "urn:ietf:params:oauth:grant-type:device_code"
    );
    assert!(
        world.authorize_queries.lock().unwrap().is_empty(),
        "no browser flow"
    );
    relay.close_stdin();
    relay.wait_exit().await;
    let stderr = relay.stderr();
    assert!(
        stderr.contains("WDJB-MJHT") && stderr.contains("/activate"),
        "{stderr}"
    );
    assert!(!stderr.contains("device-code-secret"), "{stderr}");
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");
}

#[tokio::test]
async fn insufficient_scope_steps_up_to_the_union_once() {
    let scene = Scene::new(3600).await;
    let world = &scene.world;
    let mut relay = scene.relay(&["--oauth"]).await;
    relay.initialize().await;
    let answer = relay
        .call(json!(1), "tools/call", json!({"name": "write"}))
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let queries = world.authorize_queries.lock().unwrap().clone();
    assert_eq!(queries.len(), 2, "the first login, then one step-up");
    assert_eq!(
        queries[1]["scope"], "mcp:tools mcp:write",
        "the union of held and asked"
    );
}

#[tokio::test]
async fn without_oauth_insufficient_scope_says_which_scopes_to_log_in_with() {
    let (upstream, world) = world(3600).await;
    world.access.lock().unwrap().insert("py-at-secret".into());
    world
        .scope_of
        .lock()
        .unwrap()
        .insert("py-at-secret".into(), "mcp:tools".into());
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state").join("mcp-stdio");
    std::fs::create_dir_all(&state).unwrap();
    let key = upstream.url.clone();
    let document = json!({"version": 1, "registrations": {}, "grants": {key: {
        "access_token": "py-at-secret", "token_type": "Bearer", "expires_at": null,
        "refresh_token": null, "scope": "mcp:tools", "issuer": world.base(),
        "token_endpoint": format!("{}/token", world.base()), "client_id": "client-1",
        "resource": upstream.url}}});
    let file = state.join("tokens.json");
    std::fs::write(&file, document.to_string()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let xdg = home.path().join("state");
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &[],
        &[("XDG_STATE_HOME", xdg.to_str().unwrap())],
    )
    .await;
    assert!(relay.initialize().await.get("result").is_some());
    let answer = relay
        .call(json!(1), "tools/call", json!({"name": "write"}))
        .await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--oauth-scope 'mcp:tools mcp:write'"),
        "{message}"
    );
    assert_eq!(answer["error"]["data"]["httpStatus"], 403);
}

#[tokio::test]
async fn a_machine_client_logs_in_with_client_credentials_and_no_browser() {
    let (upstream, world) = world(3600).await;
    world
        .machines_only
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &["--log-level", "trace"],
        &[
            ("XDG_STATE_HOME", state.to_str().unwrap()),
            ("MCP_OAUTH_CLIENT_ID", "machine-1"),
            ("MCP_OAUTH_CLIENT_SECRET", "machine-secret"),
        ],
    )
    .await;
    let answer = relay.initialize().await;
    assert!(answer.get("result").is_some(), "{answer}");
    let request = world.token_forms.lock().unwrap()[0].clone();
    assert_eq!(request["grant_type"], "client_credentials");
    assert_eq!(request["resource"], upstream.url);
    let basic = world.token_headers.lock().unwrap()[0].clone().unwrap();
    let expected = base64::engine::general_purpose::STANDARD.encode("machine-1:machine-secret");
    assert_eq!(basic, format!("Basic {expected}"));
    assert!(
        world.authorize_queries.lock().unwrap().is_empty(),
        "no browser"
    );
    relay.close_stdin();
    relay.wait_exit().await;
    let stderr = relay.stderr();
    assert!(
        !stderr.contains("machine-secret") && !stderr.contains(&expected),
        "{stderr}"
    );
    assert_eq!(secrets_in(&stderr), Vec::<&str>::new(), "{stderr}");
}

#[tokio::test]
async fn a_static_token_means_no_oauth_at_all() {
    let (upstream, _world) = world(3600).await;
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &["--bearer-token", "static-secret"],
        &[("XDG_STATE_HOME", state.to_str().unwrap())],
    )
    .await;
    let answer = relay
        .call(json!(0), "initialize", host_initialize_params())
        .await;
    // The answer is the proof of life: any discovery would have happened before it.
    assert_eq!(answer["error"]["data"]["httpStatus"], 401, "{answer}");
    let discovery: Vec<_> = upstream
        .seen()
        .into_iter()
        .filter(|s| s.uri.path().starts_with("/.well-known"))
        .collect();
    assert!(
        discovery.is_empty(),
        "no discovery with a static token: {discovery:?}"
    );
    assert!(!state.exists(), "no token file either");
}

#[tokio::test]
async fn a_token_about_to_expire_is_refreshed_before_it_is_used() {
    // Tokens live 30 s; the default leeway is 60 s, so every use comes "too close".
    let scene = Scene::new(30).await;
    let (upstream, world) = (&scene.upstream, &scene.world);
    let mut relay = scene.relay(&["--oauth"]).await;
    relay.initialize().await;
    relay.call(json!(1), "tools/list", json!({})).await;
    let forms = world.token_forms.lock().unwrap().clone();
    assert_eq!(
        forms.last().unwrap()["grant_type"],
        "refresh_token",
        "refreshed ahead"
    );
    let lists = upstream.posts_of("tools/list");
    assert_eq!(
        lists.len(),
        1,
        "sent once, with the fresh token: no 401 first"
    );
    let sent = lists[0].header("authorization").unwrap();
    let newest = format!("Bearer at-secret-{}", world.issued.lock().unwrap());
    assert_eq!(sent, newest);
}

#[tokio::test]
async fn a_server_that_moves_to_another_authorization_server_gets_a_fresh_login_there() {
    let scene = Scene::new(3600).await;
    let world = &scene.world;
    let mut relay = scene.relay(&["--oauth"]).await;
    relay.initialize().await;
    // The server moves: its metadata names /as2, and the old tokens stop working.
    *world.current_as.lock().unwrap() = "/as2".into();
    world.revoke_all_access();
    let listed = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    let registrations = world.registrations.lock().unwrap().clone();
    assert_eq!(
        registrations.len(),
        2,
        "registered again, at the new server"
    );
    assert_eq!(registrations[1]["registered_at"], "/as2");
    let exchanges = world.token_forms.lock().unwrap().clone();
    assert!(
        !exchanges.iter().any(|f| f["grant_type"] == "refresh_token"),
        "the old server's refresh token is not spent at either server: {exchanges:?}"
    );
    let last = exchanges.last().unwrap();
    assert_eq!(
        last["client_id"], "client-1/as2",
        "the old client id is not reused"
    );
}
