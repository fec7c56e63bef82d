//! `serve --config` with the listener's identity and replicas: `--enable-oauth` is one
//! authorization server for every server of the file and the aggregate endpoint (a token
//! is for the endpoint it names, or for all of them when it names none; a server with an
//! `auth` of its own keeps it), `--oauth-issuer`'s tokens name their user at the aggregate
//! endpoint (whose sessions no other user can take), `--cluster-key-file` sends an aggregate session's
//! requests to the replica that owns it, and a remote server of the file logs in as its
//! entry says (client credentials) or with the login `mcp-stdio login` stored.

use std::path::Path;

use serde_json::json;

use crate::common::serve::*;
use crate::common::signin::*;

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let file = dir.join("serve.toml");
    std::fs::write(&file, text).unwrap();
    file
}

fn entry(name: &str, extra: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\nenv = {{ FIXTURE_CATALOG = \"full\" }}\n{extra}\n",
        fixture()
    )
}

async fn start(file: &Path, flags: &[&str], env: &[(&str, &str)]) -> Serve {
    Serve::start_config(file, flags, env).await
}

/// `initialize` at `path` with `token`.
async fn initialize_at(serve: &Serve, path: &str, token: &str) -> Answer {
    let auth = format!("Bearer {token}");
    serve
        .send(
            "POST",
            path,
            &[("authorization", &auth)],
            &initialize_body(),
        )
        .await
}

/// `tools/call NAME` in `session` at the aggregate endpoint, with `bearer` if given.
async fn call_in(
    serve: &Serve,
    session: &str,
    bearer: Option<&str>,
    name: &str,
    arguments: serde_json::Value,
) -> Answer {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    let auth = bearer.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("mcp-session-id", session)];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    serve
        .send("POST", "/mcp", &headers, &call.to_string())
        .await
}

/// Signs `alice` in for `resource` (none: the client names no resource); the access token.
async fn token_for(serve: &Serve, client_id: &str, resource: Option<&str>) -> String {
    let pkce = Pkce::new();
    let extra: Vec<(&str, &str)> = resource.map(|r| ("resource", r)).into_iter().collect();
    let code = code_for(serve, client_id, &pkce, &extra).await;
    let answer = redeem(serve, client_id, &code, &pkce.verifier).await;
    tokens(&answer).access
}

#[tokio::test]
async fn one_authorization_server_issues_tokens_for_each_endpoint_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let own_token = "gamma-own-token-0123456789";
    // A server named like one of the authorization server's endpoints does not hide it.
    let text = format!(
        "{}{}{}{}[aggregates.team]\npath = \"/mcp\"\nservers = [\"alpha\", \"beta\"]\n",
        entry("alpha", ""),
        entry("beta", ""),
        entry(
            "gamma",
            "auth = { mode = \"token\", token_env = \"GAMMA_TOKEN\" }"
        ),
        entry("token", "auth = { mode = \"open\" }"),
    );
    let file = write(dir.path(), &text);
    let store = format!("sqlite:{}", dir.path().join("oauth.db").display());
    let serve = start(
        &file,
        &[
            "--enable-oauth",
            "--oauth-store",
            &store,
            "--dev-user",
            "alice",
        ],
        &[("GAMMA_TOKEN", own_token)],
    )
    .await;
    let origin = format!("http://127.0.0.1:{}", serve.port);

    // Every endpoint that uses it points at the one issuer; the anonymous 401 leads there.
    let anonymous = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let challenge = anonymous.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(&format!(
            "{origin}/.well-known/oauth-protected-resource/mcp"
        )),
        "{challenge}"
    );
    for path in ["/mcp", "/alpha/mcp", "/beta/mcp"] {
        let prm = serve
            .send(
                "GET",
                &format!("/.well-known/oauth-protected-resource{path}"),
                &[],
                "",
            )
            .await;
        assert_eq!(prm.status, 200, "{path}: {}", prm.body);
        assert_eq!(prm.json()["authorization_servers"], json!([origin]));
        assert_eq!(prm.json()["resource"], json!(format!("{origin}{path}")));
    }
    let metadata = serve
        .send("GET", "/.well-known/oauth-authorization-server", &[], "")
        .await;
    assert_eq!(metadata.status, 200, "{}", metadata.body);
    assert_eq!(metadata.json()["issuer"], json!(origin));

    // A token names one endpoint and is refused at the others.
    let client_id = register(&serve).await;
    let aggregate = token_for(&serve, &client_id, Some(&format!("{origin}/mcp"))).await;
    let init = initialize_at(&serve, "/mcp", &aggregate).await;
    assert_eq!(init.status, 200, "{}", init.body);
    serve.wait_stderr("principal=alice").await;
    let session = init.session();
    let answer = call_in(
        &serve,
        &session,
        Some(&aggregate),
        "beta__echo",
        json!({"text": "through the aggregate"}),
    )
    .await;
    assert!(
        answer.body.contains("through the aggregate"),
        "{}",
        answer.body
    );
    let elsewhere = initialize_at(&serve, "/alpha/mcp", &aggregate).await;
    assert_eq!(elsewhere.status, 401, "{}", elsewhere.body);

    let alpha = token_for(&serve, &client_id, Some(&format!("{origin}/alpha/mcp"))).await;
    assert_eq!(
        initialize_at(&serve, "/alpha/mcp", &alpha).await.status,
        200
    );
    assert_eq!(initialize_at(&serve, "/mcp", &alpha).await.status, 401);

    // Naming none: every endpoint that uses this server (the consent page says so).
    let pkce = Pkce::new();
    let page = serve
        .send("GET", &authorize_path(&client_id, &pkce, &[]), &[], "")
        .await;
    assert!(
        page.body
            .contains(&format!("every server of this gateway ({origin}/…)")),
        "{}",
        page.body
    );
    let every = token_for(&serve, &client_id, None).await;
    for path in ["/mcp", "/alpha/mcp", "/beta/mcp"] {
        let init = initialize_at(&serve, path, &every).await;
        assert_eq!(init.status, 200, "{path}: {}", init.body);
    }

    // /metrics for the whole file takes a token the authorization server accepts.
    assert_eq!(serve.send("GET", "/metrics", &[], "").await.status, 401);
    let every_auth = format!("Bearer {every}");
    let metrics = serve
        .send("GET", "/metrics", &[("authorization", &every_auth)], "")
        .await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(
        metrics.body.contains("server=\"alpha\""),
        "{}",
        metrics.body
    );

    // gamma checks its own token: not an endpoint of the authorization server.
    let pkce = Pkce::new();
    let gamma_resource = format!("{origin}/gamma/mcp");
    let refused = serve
        .send(
            "GET",
            &authorize_path(&client_id, &pkce, &[("resource", &gamma_resource)]),
            &[],
            "",
        )
        .await;
    assert_eq!(
        location_param(&refused, "error").as_deref(),
        Some("invalid_target"),
        "{:?} {}",
        refused.headers,
        refused.body
    );
    let described = location_param(&refused, "error_description").unwrap();
    assert!(
        described.contains(&format!("{origin}/alpha/mcp")) && !described.contains("gamma/mcp,"),
        "{described}"
    );
    assert_eq!(
        initialize_at(&serve, "/gamma/mcp", &every).await.status,
        401
    );
    assert_eq!(
        initialize_at(&serve, "/gamma/mcp", own_token).await.status,
        200
    );
    let log = serve.stderr();
    for secret in [
        aggregate.as_str(),
        alpha.as_str(),
        every.as_str(),
        own_token,
    ] {
        assert!(!log.contains(secret), "a token reached the log");
    }
    // Metadata for an endpoint that does not exist is not another endpoint's.
    let no_such = serve
        .send(
            "GET",
            "/.well-known/oauth-protected-resource/nope/mcp",
            &[],
            "",
        )
        .await;
    assert_eq!(no_such.status, 404, "{}", no_such.body);
    // Not a server and not the authorization server's: the 404 lists the endpoints.
    let unknown = serve.send("GET", "/nothing", &[], "").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.body.contains("/alpha/mcp"), "{}", unknown.body);
    assert!(unknown.body.contains("/mcp"), "{}", unknown.body);
}

const CLUSTER_KEY: &str = "a-cluster-key-of-more-than-thirty-two-bytes-for-tests";

/// One replica of `file` on a port of its own, advertising itself at that port.
async fn replica(file: &Path, key_path: &str) -> Serve {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let advertise = format!("http://127.0.0.1:{port}");
    let mut command = tokio::process::Command::new(crate::common::binary());
    command
        .args(["serve", "--port", &port, "--log-level", "debug", "--config"])
        .arg(file)
        .args([
            "--aggregate",
            "--cluster-key-file",
            key_path,
            "--advertise-url",
            &advertise,
        ])
        .env_remove("MCP_STDIO_SERVE_TOKEN");
    Serve::spawn(command).await
}

async fn echo_at(serve: &Serve, path: &str, session: &str, tool: &str, text: &str) -> Answer {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": text}}});
    serve
        .send(
            "POST",
            path,
            &[("mcp-session-id", session)],
            &call.to_string(),
        )
        .await
}

#[tokio::test]
async fn replicas_of_a_config_file_send_each_session_to_its_owner_aggregate_included() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("cluster.key");
    std::fs::write(&key_path, format!("{CLUSTER_KEY}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key_path = key_path.to_string_lossy().into_owned();
    let file = write(
        dir.path(),
        &format!("{}{}", entry("alpha", ""), entry("beta", "")),
    );
    let a = replica(&file, &key_path).await;
    let b = replica(&file, &key_path).await;

    for (path, tool) in [("/mcp", "beta__echo"), ("/alpha/mcp", "echo")] {
        let init = a.send("POST", path, &[], &initialize_body()).await;
        assert_eq!(init.status, 200, "{path}: {}", init.body);
        let session = init.session();
        assert!(
            !session.contains("127.0.0.1"),
            "the owner's address is sealed"
        );
        // B holds no such session: only forwarding to A answers it.
        let answer = echo_at(&b, path, &session, tool, "via the other replica").await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        assert!(
            answer.body.contains("via the other replica"),
            "{path}: {}",
            answer.body
        );
        // A session of one endpoint names nothing at another.
        let other = if path == "/mcp" { "/alpha/mcp" } else { "/mcp" };
        let elsewhere = echo_at(&b, other, &session, tool, "x").await;
        assert_eq!(elsewhere.status, 404, "{other}: {}", elsewhere.body);
    }
}

#[tokio::test]
async fn a_remote_server_of_the_file_logs_in_with_its_client_credentials_through_the_aggregate() {
    let (upstream, world) = crate::oauth::world(3600).await;
    world
        .machines_only
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let secret = "saas-machine-secret-77";
    let text = format!(
        "{}[servers.saas]\ntype = \"http\"\nurl = \"{}\"\noauth = {{ client_id = \"machine-1\", client_secret = \"${{SAAS_SECRET}}\", client_credentials = true, token_store = \"file\" }}\n",
        entry("alpha", ""),
        upstream.url
    );
    let file = write(dir.path(), &text);
    let state = dir.path().join("state");
    let serve = start(
        &file,
        &["--aggregate"],
        &[
            ("SAAS_SECRET", secret),
            ("XDG_STATE_HOME", state.to_str().unwrap()),
            // serve's own environment's client is not the remote server's.
            ("MCP_OAUTH_CLIENT_ID", "not-this-one"),
        ],
    )
    .await;
    let init = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.session();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let listed = serve
        .send(
            "POST",
            "/mcp",
            &[("mcp-session-id", &session)],
            &list.to_string(),
        )
        .await;
    assert!(listed.body.contains("saas__whoami"), "{}", listed.body);
    let called = call_in(&serve, &session, None, "saas__whoami", json!({})).await;
    assert!(called.body.contains("signed in"), "{}", called.body);
    let presented = upstream.posts_of("tools/call")[0].header("authorization");
    assert!(
        presented.is_some_and(|p| p.starts_with("Bearer at-secret-")),
        "the call carried the token the client credentials grant got"
    );
    let form = world.token_forms.lock().unwrap()[0].clone();
    assert_eq!(form["grant_type"], "client_credentials");
    let basic = world.token_headers.lock().unwrap()[0].clone().unwrap();
    use base64::Engine;
    let expected = base64::engine::general_purpose::STANDARD.encode(format!("machine-1:{secret}"));
    assert_eq!(basic, format!("Basic {expected}"));
    let log = serve.stderr();
    assert!(
        log.contains("--client-credentials"),
        "the relay was started with its client"
    );
    assert!(!log.contains(secret) && !log.contains(&expected) && !log.contains("at-secret-"));
    for pid in children_of(serve.child.id().unwrap()) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&cmdline).contains(secret));
    }
}

// Multi-threaded: `login` runs as a blocking child process while the fake servers answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_of_the_file_uses_the_login_stored_by_mcp_stdio_login() {
    let scene = crate::oauth::Scene::new(3600).await;
    let url = scene.upstream.url.clone();
    let (code, _, stderr) = scene.run(&["login", &url]);
    assert_eq!(code, 0, "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        &format!(
            "{}[servers.saas]\ntype = \"http\"\nurl = {url:?}\n",
            entry("alpha", "")
        ),
    );
    let serve = start(
        &file,
        &["--aggregate"],
        &[
            ("XDG_STATE_HOME", scene.state.to_str().unwrap()),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/nonexistent/mcp-stdio-test-bus",
            ),
        ],
    )
    .await;
    let init = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    let session = init.session();
    let called = call_in(&serve, &session, None, "saas__whoami", json!({})).await;
    assert!(called.body.contains("signed in"), "{}", called.body);
    let forms = scene.world.token_forms.lock().unwrap().clone();
    assert_eq!(forms.len(), 1, "the stored login was used, not a new one");
    assert!(!serve.stderr().contains("at-secret-"));
}

#[tokio::test]
async fn the_identity_providers_tokens_name_their_user_at_the_aggregate_endpoint() {
    use crate::common::issuer::{Issuer, SigningKey};
    let key = SigningKey::generate("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        &format!("{}{}", entry("alpha", ""), entry("beta", "")),
    );
    let audience = "https://mcp.example.com/";
    let serve = start(
        &file,
        &[
            "--aggregate",
            "--oauth-issuer",
            issuer.url.as_str(),
            "--oauth-audience",
            audience,
        ],
        &[],
    )
    .await;
    let anonymous = serve.send("POST", "/mcp", &[], &initialize_body()).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let prm = serve
        .send("GET", "/.well-known/oauth-protected-resource/mcp", &[], "")
        .await;
    assert_eq!(prm.json()["authorization_servers"], json!([issuer.url]));

    let ada = key.sign(&issuer.claims("ada", audience, ""), Some("k1"));
    let init = initialize_at(&serve, "/mcp", &ada).await;
    assert_eq!(init.status, 200, "{}", init.body);
    serve.wait_stderr("principal=ada").await;
    let session = init.session();
    let answer = call_in(&serve, &session, Some(&ada), "alpha__whoami", json!({})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // Another user cannot use ada's aggregate session.
    let bob = key.sign(&issuer.claims("bob", audience, ""), Some("k1"));
    let stolen = call_in(&serve, &session, Some(&bob), "alpha__whoami", json!({})).await;
    assert_eq!(stolen.status, 404, "{}", stolen.body);
    assert_eq!(serve.send("GET", "/metrics", &[], "").await.status, 401);
    let auth = format!("Bearer {ada}");
    let metrics = serve
        .send("GET", "/metrics", &[("authorization", &auth)], "")
        .await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(!serve.stderr().contains(&ada));
}
