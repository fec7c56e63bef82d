//! DPoP end to end (RFC 9449): a fake authorization server that binds tokens to the proof's
//! key (`cnf.jkt`) and a fake MCP server that challenges with the `DPoP` scheme, each able to
//! demand nonces, both checking every proof (signature by its own `jwk`, `typ`, `htm`,
//! `htu`, `iat`, `ath`, the key's thumbprint against the token's, `jti` never reused).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::common::*;
use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use axum::http::Method;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// One proof a server received, as it judged it.
#[derive(Clone, Debug)]
struct Proof {
    claims: Value,
    jkt: String,
    /// Why the server refused it, if it did.
    refused: Option<String>,
}

#[derive(Default)]
struct World {
    base: OnceLock<String>,
    /// The authorization server lists `dpop_signing_alg_values_supported`.
    as_dpop: AtomicBool,
    /// Each server wants this nonce in proofs (`None`: no nonce needed).
    as_nonce: Mutex<Option<String>>,
    rs_nonce: Mutex<Option<String>>,
    /// The resource server asks for a new nonce on every request (a broken server).
    rs_nonce_always_new: AtomicBool,
    /// The authorization server issues Bearer tokens whatever the proof (no DPoP there).
    as_ignores_dpop: AtomicBool,
    /// The resource server knows only Bearer: it challenges and accepts that scheme alone.
    rs_bearer_only: AtomicBool,
    /// Access and refresh tokens, and the key thumbprint each is bound to ("" = Bearer).
    bound_to: Mutex<HashMap<String, String>>,
    issued: AtomicU32,
    jtis: Mutex<HashSet<String>>,
    token_proofs: Mutex<Vec<Proof>>,
    token_forms: Mutex<Vec<HashMap<String, String>>>,
    rs_proofs: Mutex<Vec<Proof>>,
    rs_authorizations: Mutex<Vec<Option<String>>>,
    expires_in: AtomicU32,
}

fn b64json(part: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap_or_default()).unwrap_or(Value::Null)
}

fn thumbprint(jwk: &Value) -> String {
    let canonical = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        jwk["x"].as_str().unwrap_or(""),
        jwk["y"].as_str().unwrap_or("")
    );
    URL_SAFE_NO_PAD.encode(digest(&SHA256, canonical.as_bytes()))
}

impl World {
    fn base(&self) -> &str {
        self.base.get().unwrap()
    }

    /// Checks a proof the way RFC 9449 §4.3 says a server must; `ath_of` is the token
    /// presented with it, for a resource request.
    fn judge(&self, seen: &Seen, htu: &str, ath_of: Option<&str>) -> Result<Proof, String> {
        let jwt = seen.header("dpop").ok_or("no DPoP proof")?;
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, claims, signature] = parts[..] else {
            return Err("not a JWS".into());
        };
        let (header, claims) = (b64json(header), b64json(claims));
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        for name in ["x", "y"] {
            point.extend(
                URL_SAFE_NO_PAD
                    .decode(jwk[name].as_str().unwrap_or(""))
                    .unwrap_or_default(),
            );
        }
        let signing_input = jwt.rsplit_once('.').unwrap().0;
        let mut proof = Proof {
            claims: claims.clone(),
            jkt: thumbprint(jwk),
            refused: None,
        };
        let why =
            if header["typ"] != "dpop+jwt" || header["alg"] != "ES256" || jwk.get("d").is_some() {
                Some("bad header")
            } else if UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
                .verify(
                    signing_input.as_bytes(),
                    &URL_SAFE_NO_PAD.decode(signature).unwrap_or_default(),
                )
                .is_err()
            {
                Some("bad signature")
            } else if claims["htm"] != seen.method.as_str() || claims["htu"] != htu {
                Some("wrong htm or htu")
            } else if (claims["iat"].as_u64().unwrap_or(0) as i64 - unix_now() as i64).abs() > 60 {
                Some("stale iat")
            } else if !self
                .jtis
                .lock()
                .unwrap()
                .insert(claims["jti"].as_str().unwrap_or("").to_owned())
            {
                Some("replayed jti")
            } else if ath_of
                .map(|t| URL_SAFE_NO_PAD.encode(digest(&SHA256, t.as_bytes())))
                .as_deref()
                != claims["ath"].as_str()
            {
                Some("wrong ath")
            } else {
                None
            };
        proof.refused = why.map(str::to_owned);
        Ok(proof)
    }

    fn issue(&self, jkt: &str) -> Value {
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let (access, refresh) = (format!("dpop-at-secret-{n}"), format!("dpop-rt-secret-{n}"));
        let mut bound = self.bound_to.lock().unwrap();
        bound.insert(access.clone(), jkt.to_owned());
        bound.insert(refresh.clone(), jkt.to_owned());
        let token_type = if jkt.is_empty() { "Bearer" } else { "DPoP" };
        json!({"access_token": access, "token_type": token_type, "refresh_token": refresh,
               "expires_in": self.expires_in.load(Ordering::SeqCst)})
    }

    fn token(&self, seen: &Seen) -> Reply {
        let form: HashMap<String, String> = url::form_urlencoded::parse(seen.body.as_bytes())
            .into_owned()
            .collect();
        self.token_forms.lock().unwrap().push(form.clone());
        let htu = format!("{}/token", self.base());
        let proof = match seen.header("dpop") {
            None => None,
            Some(_) => match self.judge(seen, &htu, None) {
                Ok(proof) => Some(proof),
                Err(e) => {
                    return json_with(
                        400,
                        json!({"error": "invalid_dpop_proof", "error_description": e}),
                        vec![],
                    );
                }
            },
        };
        if let Some(proof) = &proof {
            self.token_proofs.lock().unwrap().push(proof.clone());
            if let Some(why) = &proof.refused {
                return json_with(
                    400,
                    json!({"error": "invalid_dpop_proof", "error_description": why}),
                    vec![],
                );
            }
            let wanted = self.as_nonce.lock().unwrap().clone();
            if let Some(nonce) = wanted
                && proof.claims["nonce"] != nonce.as_str()
            {
                return json_with(
                    400,
                    json!({"error": "use_dpop_nonce"}),
                    vec![("dpop-nonce", nonce)],
                );
            }
        }
        let jkt = proof
            .map(|p| p.jkt)
            .filter(|_| !self.as_ignores_dpop.load(Ordering::SeqCst))
            .unwrap_or_default();
        match form.get("grant_type").map(String::as_str) {
            Some("authorization_code") => json_with(200, self.issue(&jkt), vec![]),
            Some("refresh_token") => {
                let bound = self.bound_to.lock().unwrap().remove(&form["refresh_token"]);
                match bound {
                    // RFC 9449 §5.8: a bound refresh token needs a proof by the same key.
                    Some(was) if was == jkt => json_with(200, self.issue(&jkt), vec![]),
                    _ => json_with(400, json!({"error": "invalid_grant"}), vec![]),
                }
            }
            _ => json_with(400, json!({"error": "unsupported_grant_type"}), vec![]),
        }
    }

    fn resource(&self, seen: &Seen) -> Reply {
        let authorization = seen.header("authorization");
        self.rs_authorizations
            .lock()
            .unwrap()
            .push(authorization.clone());
        if self.rs_bearer_only.load(Ordering::SeqCst) {
            return self.bearer_only(seen, authorization.as_deref());
        }
        let challenge = |error: &str| {
            format!(
                r#"DPoP algs="ES256", resource_metadata="{}/.well-known/oauth-protected-resource/mcp"{error}"#,
                self.base()
            )
        };
        let Some(token) = authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("DPoP "))
        else {
            return json_with(401, json!({}), vec![("www-authenticate", challenge(""))]);
        };
        let Ok(proof) = self.judge(seen, &format!("{}/mcp", self.base()), Some(token)) else {
            return json_with(
                401,
                json!({}),
                vec![(
                    "www-authenticate",
                    challenge(r#", error="invalid_dpop_proof""#),
                )],
            );
        };
        self.rs_proofs.lock().unwrap().push(proof.clone());
        let bound = self.bound_to.lock().unwrap().get(token).cloned();
        if proof.refused.is_some() || bound.as_deref() != Some(proof.jkt.as_str()) {
            return json_with(
                401,
                json!({}),
                vec![("www-authenticate", challenge(r#", error="invalid_token""#))],
            );
        }
        let mut wanted = self.rs_nonce.lock().unwrap();
        if self.rs_nonce_always_new.load(Ordering::SeqCst) {
            *wanted = Some(format!("rs-nonce-{}", self.jtis.lock().unwrap().len()));
        }
        if let Some(nonce) = wanted.clone()
            && proof.claims["nonce"] != nonce.as_str()
        {
            return json_with(
                401,
                json!({}),
                vec![
                    ("www-authenticate", challenge(r#", error="use_dpop_nonce""#)),
                    ("dpop-nonce", nonce),
                ],
            );
        }
        drop(wanted);
        let request = seen.json();
        match request["method"].as_str() {
            Some("tools/list") => json_reply(result_for(&request, json!({"tools": []}))),
            _ => basic(seen),
        }
    }

    /// A resource server that knows only Bearer tokens.
    fn bearer_only(&self, seen: &Seen, authorization: Option<&str>) -> Reply {
        let token = authorization.and_then(|a| a.strip_prefix("Bearer "));
        let unbound = |t: &str| {
            self.bound_to
                .lock()
                .unwrap()
                .get(t)
                .is_some_and(String::is_empty)
        };
        if token.is_some_and(unbound) {
            return basic(seen);
        }
        let challenge = format!(
            r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
            self.base()
        );
        json_with(401, json!({}), vec![("www-authenticate", challenge)])
    }

    fn handle(&self, seen: &Seen) -> Reply {
        let base = self.base();
        match (seen.method.clone(), seen.uri.path()) {
            (Method::GET, "/.well-known/oauth-protected-resource/mcp") => json_with(
                200,
                json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
                vec![],
            ),
            (Method::GET, "/.well-known/oauth-authorization-server") => {
                let mut doc = json!({"issuer": base,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "registration_endpoint": format!("{base}/register"),
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"]});
                if self.as_dpop.load(Ordering::SeqCst) {
                    doc["dpop_signing_alg_values_supported"] = json!(["ES256"]);
                }
                json_with(200, doc, vec![])
            }
            (Method::POST, "/register") => {
                let body: Value = serde_json::from_str(&seen.body).unwrap();
                json_with(
                    201,
                    json!({"client_id": "dpop-client", "redirect_uris": body["redirect_uris"],
                                      "token_endpoint_auth_method": "none"}),
                    vec![],
                )
            }
            (Method::GET, "/authorize") => {
                let query = crate::oauth::form(seen.uri.query().unwrap_or(""));
                crate::oauth::approve(&query, "dpop-code-secret")
            }
            (Method::POST, "/token") => self.token(seen),
            (_, "/mcp") => self.resource(seen),
            _ => Reply::Status(404),
        }
    }
}

fn json_with(status: u16, body: Value, headers: Vec<(&'static str, String)>) -> Reply {
    Reply::Json {
        status,
        body: body.to_string(),
        headers,
    }
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

struct Scene {
    upstream: Upstream,
    world: Arc<World>,
    home: tempfile::TempDir,
}

impl Scene {
    async fn new(as_dpop: bool, expires_in: u32) -> Scene {
        let world = Arc::new(World::default());
        world.as_dpop.store(as_dpop, Ordering::SeqCst);
        world.expires_in.store(expires_in, Ordering::SeqCst);
        let w = world.clone();
        let upstream = Upstream::start(move |seen| w.handle(seen)).await;
        world.base.set(format!("http://{}", upstream.addr)).unwrap();
        let home = tempfile::tempdir().unwrap();
        crate::oauth::browser(home.path()); // writes home/browser.sh
        Scene {
            upstream,
            world,
            home,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "BROWSER",
                self.home
                    .path()
                    .join("browser.sh")
                    .to_str()
                    .unwrap()
                    .to_owned(),
            ),
            (
                "XDG_STATE_HOME",
                self.home.path().join("state").to_str().unwrap().to_owned(),
            ),
        ]
    }

    async fn relay(&self, args: &[&str]) -> Relay {
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut all = vec!["--oauth", "--log-level", "trace"];
        all.extend_from_slice(args);
        Relay::start_with_env(&self.upstream.url, &all, &env).await
    }

    fn stored(&self) -> String {
        std::fs::read_to_string(self.home.path().join("state/mcp-stdio/tokens.json"))
            .unwrap_or_default()
    }

    fn status(&self) -> String {
        let output = std::process::Command::new(binary())
            .args(["status", "--token-store", "file"])
            .env("XDG_STATE_HOME", self.home.path().join("state"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    }
}

/// What must never be printed: tokens, the code, proofs (JWS), and the stored key.
fn leaks(text: &str, stored: &str) -> Vec<String> {
    let mut found: Vec<String> = [
        "dpop-at-secret",
        "dpop-rt-secret",
        "dpop-code-secret",
        "eyJ",
    ]
    .into_iter()
    .filter(|s| text.contains(s))
    .map(str::to_owned)
    .collect();
    let stored: Value = serde_json::from_str(stored).unwrap_or(Value::Null);
    for grant in stored["grants"]
        .as_object()
        .into_iter()
        .flat_map(|g| g.values())
    {
        if let Some(key) = grant["dpop_key"].as_str()
            && text.contains(&key[key.len() / 2..])
        {
            found.push("the DPoP key".into());
        }
    }
    found
}

#[tokio::test]
async fn a_login_binds_its_token_and_every_request_carries_a_fresh_proof_with_each_servers_nonce() {
    let scene = Scene::new(true, 3600).await;
    *scene.world.as_nonce.lock().unwrap() = Some("as-nonce-1".into());
    *scene.world.rs_nonce.lock().unwrap() = Some("rs-nonce-1".into());
    let mut relay = scene.relay(&["--token-store", "file"]).await;
    assert!(relay.initialize().await.get("result").is_some());
    let listed = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    // The server rotates its nonce: the next request is refused once, then carries the new one.
    *scene.world.rs_nonce.lock().unwrap() = Some("rs-nonce-2".into());
    let listed = relay.call(json!(2), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    relay.close_stdin();
    relay.wait_exit().await;

    let world = &scene.world;
    let token_proofs = world.token_proofs.lock().unwrap().clone();
    assert_eq!(
        token_proofs.len(),
        2,
        "the code exchange, retried once with the nonce"
    );
    assert!(
        token_proofs[0].claims.get("nonce").is_none(),
        "the first proof has none yet"
    );
    assert_eq!(token_proofs[1].claims["nonce"], "as-nonce-1");
    assert!(
        token_proofs
            .iter()
            .all(|p| p.refused.is_none() && p.claims.get("ath").is_none())
    );
    let jkt = token_proofs[1].jkt.clone();
    let rs_proofs = world.rs_proofs.lock().unwrap().clone();
    assert!(rs_proofs.len() >= 4, "{rs_proofs:?}");
    for proof in &rs_proofs {
        assert_eq!(proof.refused, None, "{proof:?}");
        assert_eq!(proof.jkt, jkt, "the token's key signs every proof");
    }
    let nonces: Vec<&Value> = rs_proofs.iter().map(|p| &p.claims["nonce"]).collect();
    assert_eq!(
        nonces[0],
        &Value::Null,
        "the first request to the server has no nonce yet"
    );
    assert!(
        nonces.contains(&&json!("rs-nonce-1")) && nonces.last() == Some(&&json!("rs-nonce-2")),
        "{nonces:?}"
    );
    let authorizations = world.rs_authorizations.lock().unwrap().clone();
    assert!(
        authorizations
            .iter()
            .flatten()
            .all(|a| a.starts_with("DPoP dpop-at-secret-")),
        "the DPoP scheme, never Bearer: {authorizations:?}"
    );
    // The grant keeps its key (as a secret), status says so, and nothing leaked.
    let stored = scene.stored();
    let grant = serde_json::from_str::<Value>(&stored).unwrap()["grants"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(grant["token_type"], "DPoP");
    assert!(
        grant["dpop_key"].as_str().is_some_and(|k| k.len() > 100),
        "{grant}"
    );
    let status = scene.status();
    assert!(status.contains("DPoP-bound"), "{status}");
    let stderr = relay.stderr();
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG"),
        "trace logging was on"
    );
    assert_eq!(leaks(&(stderr + &status), &stored), Vec::<String>::new());
}

#[tokio::test]
async fn a_refresh_is_proved_with_the_same_key_and_keeps_the_binding() {
    // Tokens that expire at once: the second request refreshes first.
    let scene = Scene::new(true, 1).await;
    let mut relay = scene
        .relay(&["--token-store", "file", "--oauth-refresh-leeway", "30"])
        .await;
    assert!(relay.initialize().await.get("result").is_some());
    let listed = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    relay.close_stdin();
    relay.wait_exit().await;
    let forms = scene.world.token_forms.lock().unwrap().clone();
    assert!(
        forms.iter().any(|f| f["grant_type"] == "refresh_token"),
        "{forms:?}"
    );
    let token_proofs = scene.world.token_proofs.lock().unwrap().clone();
    assert!(token_proofs.len() >= 2);
    assert!(
        token_proofs.iter().all(|p| p.jkt == token_proofs[0].jkt),
        "one key for the login"
    );
    let rs_proofs = scene.world.rs_proofs.lock().unwrap().clone();
    assert!(
        rs_proofs
            .iter()
            .all(|p| p.refused.is_none() && p.jkt == token_proofs[0].jkt)
    );
    assert!(scene.stored().contains("dpop_key"));
}

#[tokio::test]
async fn the_dpop_challenge_alone_is_enough_in_auto_mode_and_never_means_bearer() {
    // The authorization server does not list DPoP; the resource server's DPoP challenge
    // is what asks for it.
    let scene = Scene::new(false, 3600).await;
    let mut relay = scene.relay(&["--token-store", "file"]).await;
    assert!(relay.initialize().await.get("result").is_some());
    relay.close_stdin();
    relay.wait_exit().await;
    assert!(!scene.world.token_proofs.lock().unwrap().is_empty());

    let scene = Scene::new(true, 3600).await;
    let mut relay = scene
        .relay(&["--token-store", "file", "--dpop", "never"])
        .await;
    let answer = relay.initialize().await;
    relay.close_stdin();
    relay.wait_exit().await;
    assert!(
        scene.world.token_proofs.lock().unwrap().is_empty(),
        "no proof with --dpop never"
    );
    assert!(!scene.stored().contains("dpop_key"));
    // This server takes only DPoP tokens: the Bearer token is refused, and the host is told.
    assert!(answer.get("error").is_some(), "{answer}");

    // --dpop always: a server that answers a proof with a Bearer token is refused, clearly.
    let scene = Scene::new(true, 3600).await;
    scene.world.as_ignores_dpop.store(true, Ordering::SeqCst);
    let mut relay = scene
        .relay(&["--token-store", "file", "--dpop", "always"])
        .await;
    let answer = relay.initialize().await;
    relay.close_stdin();
    relay.wait_exit().await;
    let said = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        said.contains("--dpop always") && said.contains("Bearer"),
        "{answer}"
    );
    assert!(
        !scene.stored().contains("dpop-at-secret"),
        "the unbound token is not kept"
    );
}

#[tokio::test]
async fn a_server_that_keeps_asking_for_new_nonces_gets_one_retry_not_a_loop() {
    let scene = Scene::new(true, 3600).await;
    scene
        .world
        .rs_nonce_always_new
        .store(true, Ordering::SeqCst);
    let mut relay = scene.relay(&["--token-store", "file"]).await;
    let answer = relay.initialize().await;
    relay.close_stdin();
    relay.wait_exit().await;
    assert!(answer.get("error").is_some(), "{answer}");
    let requests = scene.world.rs_authorizations.lock().unwrap().len();
    // Each request the relay makes (the era probe, initialize, the legacy fallback) tries
    // the nonce once and the token once: a handful of requests in all, never a loop.
    assert!(
        requests <= 12,
        "bounded: {requests} requests {:?}",
        scene.world.rs_authorizations.lock().unwrap()
    );
    let stderr = relay.stderr();
    assert!(
        stderr.contains("DEBUG") || stderr.contains("TRACE"),
        "live logs: {stderr}"
    );
    assert_eq!(leaks(&stderr, &scene.stored()), Vec::<String>::new());
}

// Multi-threaded: the check runs as a blocking child process while the fake servers keep
// answering on the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_uses_a_bound_login_with_fresh_proofs_and_the_servers_nonce() {
    let scene = Scene::new(true, 3600).await;
    *scene.world.rs_nonce.lock().unwrap() = Some("rs-nonce-check".into());
    let env = scene.env();
    let output = std::process::Command::new(binary())
        .args([
            "check",
            &scene.upstream.url,
            "--oauth",
            "--json",
            "--token-store",
            "file",
            "--log-level",
            "trace",
        ])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["auth"]["credential"], "new-login", "{report}");
    let rs_proofs = scene.world.rs_proofs.lock().unwrap().clone();
    assert!(rs_proofs.len() >= 2, "{rs_proofs:?}");
    assert!(
        rs_proofs.iter().all(|p| p.refused.is_none()),
        "{rs_proofs:?}"
    );
    assert!(
        rs_proofs
            .iter()
            .any(|p| p.claims["nonce"] == "rs-nonce-check"),
        "the nonce was carried after it was asked for"
    );
    // The login's own log line: the channel the secrets would leak on is live.
    assert!(
        stderr.contains("logged in with a browser (DPoP-bound)"),
        "{stderr}"
    );
    assert_eq!(
        leaks(&(stdout + &stderr), &scene.stored()),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_server_that_challenges_with_bearer_alone_gets_bearer_tokens_though_its_authorization_server_offers_dpop()
 {
    // oidc-provider advertises DPoP by default, in front of servers that know only
    // Bearer: binding there would lock the user out (WORKAROUNDS #59).
    let scene = Scene::new(true, 3600).await;
    scene.world.rs_bearer_only.store(true, Ordering::SeqCst);
    let mut relay = scene.relay(&["--token-store", "file"]).await;
    assert!(relay.initialize().await.get("result").is_some());
    relay.close_stdin();
    relay.wait_exit().await;
    assert!(
        scene.world.token_proofs.lock().unwrap().is_empty(),
        "no proof"
    );
    assert!(!scene.stored().contains("dpop_key"));
}

#[tokio::test]
async fn a_refresh_answered_with_a_bearer_token_drops_the_key_and_always_refuses_it() {
    for (mode, kept_working) in [("auto", true), ("always", false)] {
        // Bound at login; then the authorization server stops binding, and the token
        // (expiring at once) is refreshed before the next request.
        let scene = Scene::new(true, 1).await;
        let args = [
            "--token-store",
            "file",
            "--oauth-refresh-leeway",
            "30",
            "--dpop",
            mode,
        ];
        let mut relay = scene.relay(&args).await;
        assert!(relay.initialize().await.get("result").is_some());
        assert!(scene.stored().contains("dpop_key"), "bound at login");
        let bound_so_far = scene.world.issued.load(Ordering::SeqCst);
        scene.world.as_ignores_dpop.store(true, Ordering::SeqCst);
        scene.world.rs_bearer_only.store(true, Ordering::SeqCst);
        let listed = relay.call(json!(1), "tools/list", json!({})).await;
        relay.close_stdin();
        relay.wait_exit().await;
        let forms = scene.world.token_forms.lock().unwrap().clone();
        assert!(
            forms.iter().any(|f| f["grant_type"] == "refresh_token"),
            "{forms:?}"
        );
        let authorizations = scene.world.rs_authorizations.lock().unwrap().clone();
        // auto: the refreshed Bearer token is presented as one (no key, no proof) and
        // works; always: it is refused and never presented.
        assert_eq!(
            listed.get("result").is_some(),
            kept_working,
            "{mode}: {listed}"
        );
        let unbound_as_dpop = authorizations.iter().flatten().any(|a| {
            a.strip_prefix("DPoP dpop-at-secret-")
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n > bound_so_far)
        });
        assert!(!unbound_as_dpop, "{mode}: {authorizations:?}");
    }
}
