//! `serve --config FILE`: several servers on one listener at `/NAME/mcp`, each with its own
//! era, bounds and auth; `/metrics` labelled by server; SIGHUP adds, removes and changes
//! servers while a session on an unchanged one goes on, a changed server's old sessions
//! finish on the old child, a removed server's sessions end after `--reload-grace`; a file
//! that does not parse changes nothing; usage errors exit 2.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::serve::*;
use crate::common::{binary, run_to_end};

fn sandbox_entry(name: &str, root: &Path) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [\"sandbox\", \"--root\", {:?}]\n",
        binary(),
        root.display().to_string()
    )
}

fn fixture_entry(name: &str, extra: &str) -> String {
    format!("[servers.{name}]\ncommand = {:?}\n{extra}\n", fixture())
}

async fn start(file: &Path, flags: &[&str], env: &[(&str, &str)]) -> Serve {
    Serve::start_config(file, flags, env).await
}

async fn initialize_at(serve: &Serve, path: &str, headers: &[(&str, &str)]) -> Answer {
    serve.send("POST", path, headers, &initialize_body()).await
}

async fn call_at(serve: &Serve, path: &str, session: &str, id: u64, tool: &str) -> Answer {
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"text":"hi"}}});
    serve
        .send(
            "POST",
            path,
            &[("mcp-session-id", session)],
            &body.to_string(),
        )
        .await
}

fn text_of(answer: &Answer) -> String {
    let value: Value = if answer.body.starts_with('{') {
        answer.json()
    } else {
        answer.events().pop().expect("an event")
    };
    value["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {value}"))
        .to_owned()
}

async fn modern_at(serve: &Serve, path: &str, method: &str, params: Value) -> Answer {
    let (headers, body) = modern_request(json!(7), method, params, None);
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    serve.send("POST", path, &headers, &body).await
}

#[tokio::test]
async fn two_servers_each_with_its_own_path_auth_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    let config = format!(
        "{}{}",
        sandbox_entry("files", dir.path()),
        fixture_entry(
            "tools",
            "max_sessions = 1\nspare_children = 0\nauth = { mode = \"token\", token_env = \"TOOLS_TOKEN\" }"
        )
    );
    std::fs::write(&file, config).unwrap();
    let serve = start(&file, &[], &[("TOOLS_TOKEN", "tools-secret-77")]).await;
    assert!(serve.url.ends_with("/files/mcp"), "{}", serve.url);

    // The sandbox is open, in both eras.
    let answer = modern_at(&serve, "/files/mcp", "tools/list", json!({})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body.contains("read_file") || answer.body.contains("list_directory"),
        "{}",
        answer.body
    );
    let legacy = initialize_at(&serve, "/files/mcp", &[]).await;
    assert_eq!(legacy.status, 200, "{}", legacy.body);

    // The fixture needs its own token, and has its own bound.
    let refused = initialize_at(&serve, "/tools/mcp", &[]).await;
    assert_eq!(refused.status, 401);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("/.well-known/oauth-protected-resource/tools/mcp"),
        "{challenge}"
    );
    let prm = serve
        .send(
            "GET",
            "/.well-known/oauth-protected-resource/tools/mcp",
            &[],
            "",
        )
        .await;
    assert_eq!(prm.status, 200, "{}", prm.body);
    assert!(
        prm.json()["resource"]
            .as_str()
            .unwrap()
            .ends_with("/tools/mcp")
    );
    let bearer = [("authorization", "Bearer tools-secret-77")];
    let session = initialize_at(&serve, "/tools/mcp", &bearer).await;
    assert_eq!(session.status, 200, "{}", session.body);
    let second = initialize_at(&serve, "/tools/mcp", &bearer).await;
    assert_eq!(
        second.status, 503,
        "max_sessions = 1 for this server: {}",
        second.body
    );
    // The files server's token is not the tools one, and the other way round.
    let sandbox_session = initialize_at(&serve, "/files/mcp", &bearer).await;
    assert_eq!(sandbox_session.status, 200);

    // A session of one server is unknown at another's path.
    let files_session = legacy.session();
    let ping = json!({"jsonrpc":"2.0","id":9,"method":"ping"}).to_string();
    let headers = [("mcp-session-id", files_session.as_str()), bearer[0]];
    let elsewhere = serve.send("POST", "/tools/mcp", &headers, &ping).await;
    assert_eq!(elsewhere.status, 404, "{}", elsewhere.body);
    // The per-server token never reaches the log (which is written to: debug level).
    assert!(serve.stderr().contains("session started"));
    assert!(!serve.stderr().contains("tools-secret-77"));

    // Unknown names say where the servers are.
    let unknown = serve
        .send("POST", "/nope/mcp", &[], &initialize_body())
        .await;
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.body.contains("/files/mcp, /tools/mcp"),
        "{}",
        unknown.body
    );

    let health = serve.send("GET", "/healthz", &[], "").await;
    assert_eq!(health.status, 200);
    let metrics = serve.send("GET", "/metrics", &[], "").await.body;
    assert!(
        metrics.contains("mcp_stdio_sessions{server=\"files\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mcp_stdio_sessions{server=\"tools\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("mcp_stdio_servers 2"), "{metrics}");
    assert_eq!(
        metrics.matches("# TYPE mcp_stdio_sessions gauge").count(),
        1
    );
}

#[tokio::test]
async fn sighup_adds_changes_and_removes_while_unchanged_sessions_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    let write = |body: String| std::fs::write(&file, body).unwrap();
    write(format!(
        "{}{}{}",
        fixture_entry("keep", "spare_children = 0"),
        fixture_entry("change", "spare_children = 0"),
        fixture_entry("drop", "spare_children = 0"),
    ));
    let serve = start(&file, &["--reload-grace", "1"], &[]).await;
    let kept = initialize_at(&serve, "/keep/mcp", &[]).await.session();
    let changed = initialize_at(&serve, "/change/mcp", &[]).await.session();
    let dropped = initialize_at(&serve, "/drop/mcp", &[]).await.session();
    let changed_pid = text_of(&call_at(&serve, "/change/mcp", &changed, 1, "whoami").await);

    // change: a modern child now (FIXTURE_ERA); drop: gone; add: new.
    write(format!(
        "{}{}{}",
        fixture_entry("keep", "spare_children = 0"),
        fixture_entry(
            "change",
            "spare_children = 0\nenv = { FIXTURE_ERA = \"modern\" }"
        ),
        fixture_entry("add", "spare_children = 0"),
    ));
    let pid: i32 = serve.child.id().unwrap() as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    serve.wait_stderr("SIGHUP: reloaded").await;
    let log = serve.stderr();
    assert!(
        log.contains("added=add changed=change removed=drop unchanged=keep"),
        "{log}"
    );

    // The unchanged server's session goes on, on the same child.
    assert_eq!(
        text_of(&call_at(&serve, "/keep/mcp", &kept, 2, "echo").await),
        "hi"
    );
    // The changed server's old session finishes on its old child...
    assert_eq!(
        text_of(&call_at(&serve, "/change/mcp", &changed, 3, "whoami").await),
        changed_pid
    );
    // ...while new requests meet the new one.
    let discover = modern_at(&serve, "/change/mcp", "server/discover", json!({})).await;
    assert!(
        discover.body.contains("modern-fixture"),
        "{}",
        discover.body
    );
    // The added server serves; the removed one takes nothing new.
    assert_eq!(initialize_at(&serve, "/add/mcp", &[]).await.status, 200);
    let gone = initialize_at(&serve, "/drop/mcp", &[]).await;
    assert_eq!(gone.status, 404);
    assert!(
        gone.body.contains("removed from the config file"),
        "{}",
        gone.body
    );
    // The removed server's open session lasts until --reload-grace (1 s), then ends.
    assert_eq!(
        text_of(&call_at(&serve, "/drop/mcp", &dropped, 4, "echo").await),
        "hi"
    );
    serve.wait_stderr("--reload-grace is up").await;
    crate::common::wait_logged(|| serve.stderr(), "an old server generation stopped").await;
    let after = call_at(&serve, "/drop/mcp", &dropped, 5, "echo").await;
    assert_eq!(after.status, 404, "{}", after.body);
    let metrics = serve.send("GET", "/metrics", &[], "").await.body;
    assert!(
        metrics.contains("mcp_stdio_config_reloads_total{outcome=\"applied\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_broken_file_on_reload_keeps_the_old_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    std::fs::write(&file, fixture_entry("one", "spare_children = 0")).unwrap();
    let serve = start(&file, &[], &[]).await;
    let session = initialize_at(&serve, "/one/mcp", &[]).await.session();
    let pid: i32 = serve.child.id().unwrap() as i32;
    for (n, broken) in [
        "[servers.one\ncommand = 1".to_owned(),
        fixture_entry("one", "max_sessions = 0"),
        "[servers.two]\ncommand = \"/no/such/program\"\n".to_owned(),
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(&file, broken).unwrap();
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::HUP,
        )
        .unwrap();
        crate::common::wait_logged_count(
            || serve.stderr(),
            &["not reloaded, every server goes on as it was"],
            n + 1,
        )
        .await;
    }
    let log = serve.stderr();
    assert!(
        log.contains("not valid TOML")
            && log.contains("max_sessions 0")
            && log.contains("cannot find the command"),
        "{log}"
    );
    assert_eq!(
        text_of(&call_at(&serve, "/one/mcp", &session, 1, "echo").await),
        "hi"
    );
    let metrics = serve.send("GET", "/metrics", &[], "").await.body;
    assert!(
        metrics.contains("mcp_stdio_config_reloads_total{outcome=\"refused\"} 3"),
        "{metrics}"
    );
    assert!(metrics.contains("mcp_stdio_servers 1"));
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    std::fs::write(&file, fixture_entry("one", "")).unwrap();
    let path = file.to_str().unwrap();
    let (code, _, stderr) = run_to_end(&["serve", "--config", path, "--", "cat"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot be used together"), "{stderr}");
    let (code, _, stderr) = run_to_end(&["serve", "--config", path, "--path", "/x"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--path"), "{stderr}");
    std::fs::write(&file, "[servers.one]\ncomand = \"x\"\n").unwrap();
    let (code, _, stderr) = run_to_end(&["serve", "--config", path]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown key(s) comand"), "{stderr}");
    let (code, _, stderr) = run_to_end(&["serve", "--config", "/no/such/file.toml"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read it"), "{stderr}");
}
