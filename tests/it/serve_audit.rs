//! `serve --audit-log`: one JSON line per request with who, which client, what, the
//! arguments' digest, the outcome (ok, tool error, refused by which rule, protocol error,
//! timeout, cancelled), the duration, the id, the session and the trace; rotation by size
//! with owner-only files; a sink that cannot keep up makes requests wait or refuses them
//! (and `/metrics` counts both), never dropping a line; no token in the file.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::eventually;
use crate::common::issuer::{Issuer, SigningKey};
use crate::common::serve::*;

const AUDIENCE: &str = "http://127.0.0.1/mcp";
const SCOPE: &str = "mcp:tools";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

const POLICY: &str = r#"
[[rules]]
name = "no-secret-echo"
phase = "call"
effect = "deny"
when = "tool.name == 'echo' && has(arguments.text) && arguments.text == 'secret plans'"

[[rules]]
name = "calls"
phase = "call"
effect = "allow"
when = "true"
"#;

struct Setup {
    dir: tempfile::TempDir,
    issuer: Issuer,
    key: SigningKey,
}

impl Setup {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.toml"), POLICY).unwrap();
        let key = SigningKey::generate("k1");
        let issuer = Issuer::start(&[&key]).await;
        Setup { dir, issuer, key }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// serve with a policy, writing its audit log to `audit.log` unless `extra` names
    /// another.
    async fn serve(&self, extra: &[&str]) -> Serve {
        let policy = self.dir.path().join("policy.toml");
        let log = self.log();
        let mut flags = vec![
            "--oauth-issuer",
            self.issuer.url.as_str(),
            "--oauth-audience",
            AUDIENCE,
            "--oauth-scope",
            SCOPE,
            "--policy",
            policy.to_str().unwrap(),
        ];
        if !extra.contains(&"--audit-log") {
            flags.extend(["--audit-log", log.to_str().unwrap()]);
        }
        flags.extend_from_slice(extra);
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        Serve::start_with(&flags, &[fixture().as_str()], &[]).await
    }

    fn bearer(&self, sub: &str) -> String {
        let claims = self.issuer.claims(sub, AUDIENCE, SCOPE);
        format!("Bearer {}", self.key.sign(&claims, None))
    }
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Waits until the log holds `n` lines.
async fn wait_lines(path: &Path, n: usize) -> Vec<Value> {
    eventually(&format!("{n} audit lines"), async || {
        let found = lines(path);
        (found.len() >= n)
            .then_some(found.clone())
            .ok_or(format!("{} lines: {found:?}", found.len()))
    })
    .await
}

/// `echo` with the text "x", as request `id`.
async fn echo_x(serve: &Serve, bearer: &str, session: &str, id: u64) -> Answer {
    let params = json!({"name": "echo", "arguments": {"text": "x"}});
    call(serve, bearer, session, id, params, &[]).await
}

/// How many of the lines in `text` are `tools/call`s.
fn call_lines(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains("\"method\":\"tools/call\""))
        .count() as u64
}

/// A counter of `/metrics` (which wants a token here).
async fn counter(serve: &Serve, bearer: &str, name: &str) -> u64 {
    serve.gauge_with(name, &[("authorization", bearer)]).await
}

async fn session(serve: &Serve, bearer: &str) -> String {
    let answer = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", bearer)],
            &initialize_body(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.session()
}

async fn call(
    serve: &Serve,
    bearer: &str,
    session: &str,
    id: u64,
    params: Value,
    extra: &[(&str, &str)],
) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let mut headers = vec![("authorization", bearer), ("mcp-session-id", session)];
    headers.extend_from_slice(extra);
    serve
        .send("POST", "/mcp", &headers, &body.to_string())
        .await
}

#[tokio::test]
async fn the_lines_go_to_stdout_or_stderr_when_told_and_only_there() {
    let setup = Setup::new().await;
    let ada = setup.bearer("ada");
    for sink in ["-", "stderr"] {
        let serve = setup
            .serve(&["--audit-log", sink, "--log-level", "debug"])
            .await;
        let session = session(&serve, &ada).await;
        for id in 1..=3 {
            assert_eq!(echo_x(&serve, &ada, &session, id).await.status, 200);
        }
        let (wanted, other) = match sink {
            "-" => (&serve.stdout, &serve.stderr),
            _ => (&serve.stderr, &serve.stdout),
        };
        let text = eventually(&format!("three calls on {sink}"), async || {
            let text = wanted.lock().unwrap().clone();
            (call_lines(&text) >= 3).then_some(text.clone()).ok_or(text)
        })
        .await;
        // Each audit line is whole JSON, whatever else (the log) shares the stream.
        let audit: Vec<Value> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{sink}: not JSON ({e}): {l}"))
            })
            .collect();
        assert_eq!(
            audit.iter().filter(|l| l["method"] == "tools/call").count(),
            3,
            "{sink}: {text}"
        );
        assert!(
            audit.iter().all(|l| l["principal"] == "ada"),
            "{sink}: {text}"
        );
        // The other stream is alive (serve logged to stderr; stdout got nothing else).
        let other = other.lock().unwrap().clone();
        assert_eq!(
            call_lines(&other),
            0,
            "{sink}: lines leaked to the other stream: {other}"
        );
        if sink == "-" {
            assert!(
                serve.stderr().contains("serving"),
                "stderr is the log: {other}"
            );
            assert!(
                text.lines().all(|l| l.starts_with('{')),
                "stdout holds nothing but audit lines: {text}"
            );
        }
        assert!(
            !Path::new("stderr").exists(),
            "stderr is a stream, not a file's name"
        );
        assert!(!setup.log().exists(), "{sink}: no file was written");
    }
}

#[tokio::test]
async fn every_outcome_is_one_line_with_its_fields() {
    let setup = Setup::new().await;
    let serve = setup.serve(&["--timeout-response", "1"]).await;
    let ada = setup.bearer("ada");
    let session = session(&serve, &ada).await;
    let traceparent = format!("00-{TRACE}-00f067aa0ba902b7-01");

    let ok = call(
        &serve,
        &ada,
        &session,
        1,
        json!({"name": "echo", "arguments": {"text": "hi"}}),
        &[("traceparent", &traceparent)],
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    call(
        &serve,
        &ada,
        &session,
        2,
        json!({"name": "fail", "arguments": {}}),
        &[],
    )
    .await;
    call(
        &serve,
        &ada,
        &session,
        3,
        json!({"name": "echo", "arguments": {"text": "secret plans"}}),
        &[],
    )
    .await;
    call(
        &serve,
        &ada,
        &session,
        4,
        json!({"name": "nope", "arguments": {}}),
        &[],
    )
    .await;
    let slow = call(
        &serve,
        &ada,
        &session,
        5,
        json!({"name": "slow", "arguments": {"ms": 3000}}),
        &[],
    )
    .await;
    assert_eq!(slow.status, 504, "{}", slow.body);
    // The trace from `_meta` wins over the header.
    let meta_trace = json!({"name": "echo", "arguments": {"text": "m"}, "_meta": {"traceparent": format!("00-{}-00f067aa0ba902b7-01", "a".repeat(32))}});
    call(
        &serve,
        &ada,
        &session,
        6,
        meta_trace,
        &[("traceparent", &traceparent)],
    )
    .await;
    // A stream the client drops before its answer: `ask` waits for the client's reply.
    let mut open = serve
        .open_request(&session, &[("authorization", &ada)], &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask", "arguments": {}}}))
        .await;
    let mut seen = String::new();
    read_until(open.body_mut(), &mut seen, |s| {
        s.contains("elicitation/create")
    })
    .await;
    drop(open);

    // initialize, then seven calls.
    let found = wait_lines(&setup.log(), 8).await;
    assert_eq!(found.len(), 8, "{found:#?}");
    let by_id = |id: u64| {
        found
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("no line for {id}: {found:#?}"))
    };
    let initialize = &found[0];
    assert_eq!(initialize["method"], "initialize");
    assert_eq!(initialize["session"], &session[..8]);
    assert_eq!(initialize["client"], "t/1");

    let first = by_id(1);
    assert_eq!(first["outcome"], "ok");
    assert_eq!(first["principal"], "ada");
    assert_eq!(first["client"], "t/1");
    assert_eq!(first["method"], "tools/call");
    assert_eq!(first["name"], "echo");
    assert_eq!(first["session"], &session[..8]);
    assert_eq!(first["trace_id"], TRACE);
    assert!(
        first["arguments_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{first}"
    );
    assert!(
        first.get("arguments").is_none(),
        "values only with --audit-arguments: {first}"
    );
    assert!(first["duration_ms"].as_f64().unwrap() >= 0.0);
    assert!(first["time"].as_str().unwrap().ends_with('Z'), "{first}");
    assert_eq!(by_id(2)["outcome"], "tool_error");
    assert_eq!(by_id(3)["outcome"], "refused");
    assert_eq!(by_id(3)["rule"], "no-secret-echo");
    assert_eq!(by_id(4)["outcome"], "protocol_error");
    assert_eq!(by_id(4)["error_code"], -32602);
    assert_eq!(by_id(5)["outcome"], "timeout");
    assert_eq!(by_id(6)["trace_id"], "a".repeat(32));
    assert_eq!(by_id(7)["outcome"], "cancelled");
    // The same arguments, the same digest; others, another.
    assert_ne!(by_id(1)["arguments_digest"], by_id(3)["arguments_digest"]);
}

#[tokio::test]
async fn the_file_rotates_by_size_and_stays_the_owners() {
    let setup = Setup::new().await;
    let serve = setup
        .serve(&["--audit-log-max-size", "1024", "--audit-log-keep", "2"])
        .await;
    let ada = setup.bearer("ada");
    let session = session(&serve, &ada).await;
    for id in 1..=20 {
        echo_x(&serve, &ada, &session, id).await;
    }
    let log = setup.log();
    eventually("the twentieth call's line", async || {
        let all: Vec<Value> = [
            log.with_extension("log.2"),
            log.with_extension("log.1"),
            log.clone(),
        ]
        .iter()
        .flat_map(|p| lines(p))
        .collect();
        all.iter()
            .any(|l| l["id"] == 20)
            .then_some(())
            .ok_or(format!("{} lines", all.len()))
    })
    .await;
    let mut names: Vec<String> = std::fs::read_dir(setup.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("audit.log"))
        .collect();
    names.sort();
    assert_eq!(names, ["audit.log", "audit.log.1", "audit.log.2"]);
    for name in names {
        let path = setup.dir.path().join(name);
        assert!(
            std::fs::metadata(&path).unwrap().len() <= 1024 + 600,
            "{}",
            path.display()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
    }
}

/// A FIFO nobody drains: the writer blocks once the pipe's buffer is full.
struct Stuck {
    path: PathBuf,
    reader: std::fs::File,
}

impl Stuck {
    fn new(dir: &Path) -> Self {
        let path = dir.join("audit.fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&path)
            .unwrap();
        Stuck { path, reader }
    }

    /// Reads what is in the pipe now.
    fn drain(&mut self) -> String {
        use std::io::Read;
        let mut text = Vec::new();
        let mut buffer = [0u8; 65536];
        loop {
            match self.reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buffer[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        String::from_utf8(text).unwrap()
    }
}

use std::os::unix::fs::OpenOptionsExt;

#[tokio::test]
async fn a_full_queue_refuses_calls_when_told_to_and_counts_them() {
    let setup = Setup::new().await;
    let mut stuck = Stuck::new(setup.dir.path());
    let path = stuck.path.to_str().unwrap().to_owned();
    let serve = setup
        .serve(&[
            "--audit-log",
            &path,
            "--audit-queue",
            "2",
            "--audit-when-full",
            "refuse",
        ])
        .await;
    let ada = setup.bearer("ada");
    let session = session(&serve, &ada).await;
    // Each line is a few hundred bytes: the pipe (64 KiB) fills within a few hundred.
    let mut refused = None;
    for id in 1..=3000u64 {
        let answer = echo_x(&serve, &ada, &session, id).await;
        if answer.status == 503 {
            refused = Some((id, answer));
            break;
        }
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let (last, answer) = refused.expect("a call was refused once the sink was stuck");
    assert!(
        answer.body.contains("the audit log cannot keep up"),
        "{}",
        answer.body
    );
    assert!(counter(&serve, &ada, "mcp_stdio_audit_refused_total").await >= 1);
    // Nothing was lost: once drained, every call that ran has its line.
    let mut text = String::new();
    eventually("every line of the calls that ran", async || {
        text.push_str(&stuck.drain());
        let ids = call_lines(&text);
        (ids == last - 1)
            .then_some(())
            .ok_or(format!("{ids} of {}", last - 1))
    })
    .await;
    assert!(
        !text.contains(&format!("\"id\":{last},")),
        "the refused call has no line"
    );
}

#[tokio::test]
async fn a_full_queue_makes_calls_wait_when_told_to_and_loses_nothing() {
    let setup = Setup::new().await;
    let mut stuck = Stuck::new(setup.dir.path());
    let path = stuck.path.to_str().unwrap().to_owned();
    let serve = std::sync::Arc::new(
        setup
            .serve(&[
                "--audit-log",
                &path,
                "--audit-queue",
                "2",
                "--audit-when-full",
                "wait",
            ])
            .await,
    );
    let ada = setup.bearer("ada");
    let session = session(&serve, &ada).await;
    // Calls run one after another until one waits for room.
    let caller = {
        let (serve, ada, session) = (serve.clone(), ada.clone(), session.clone());
        tokio::spawn(async move {
            let mut made = 0u64;
            while made < 3000 {
                made += 1;
                let answer = echo_x(&serve, &ada, &session, made).await;
                assert_eq!(answer.status, 200, "{}", answer.body);
                if counter(&serve, &ada, "mcp_stdio_audit_waits_total").await >= 1 {
                    break;
                }
            }
            made
        })
    };
    eventually("a call waiting for room in the audit queue", async || {
        let waits = counter(&serve, &ada, "mcp_stdio_audit_waits_total").await;
        (waits >= 1).then_some(()).ok_or(format!("{waits} waits"))
    })
    .await;
    // Draining the sink lets it go on; every call has its line.
    let mut text = String::new();
    let mut caller = caller;
    let deadline = std::time::Instant::now() + DEADLINE;
    let made = loop {
        text.push_str(&stuck.drain());
        assert!(
            std::time::Instant::now() < deadline,
            "the waiting call went on once drained"
        );
        if let Ok(done) =
            tokio::time::timeout(std::time::Duration::from_millis(20), &mut caller).await
        {
            break done.unwrap();
        }
    };
    eventually("every call's line", async || {
        text.push_str(&stuck.drain());
        let ids = call_lines(&text);
        (ids == made)
            .then_some(())
            .ok_or(format!("{ids} of {made}"))
    })
    .await;
    assert_eq!(
        counter(&serve, &ada, "mcp_stdio_audit_refused_total").await,
        0
    );
}

#[tokio::test]
async fn no_token_or_secret_reaches_the_file() {
    let setup = Setup::new().await;
    let serve = setup.serve(&["--audit-arguments"]).await;
    let ada = setup.bearer("ada");
    let session = session(&serve, &ada).await;
    let token = ada.trim_start_matches("Bearer ").to_owned();
    // The attack corpus of tokens: forged, expired, for another audience.
    let other = SigningKey::generate("k1");
    let forged = format!(
        "Bearer {}",
        other.sign(&setup.issuer.claims("ada", AUDIENCE, SCOPE), None)
    );
    let mut expired = setup.issuer.claims("ada", AUDIENCE, SCOPE);
    expired["exp"] = json!(1);
    let expired = format!("Bearer {}", setup.key.sign(&expired, None));
    let elsewhere = format!(
        "Bearer {}",
        setup.key.sign(
            &setup.issuer.claims("ada", "http://elsewhere/mcp", SCOPE),
            None
        )
    );
    for bad in [&forged, &expired, &elsewhere] {
        let answer = call(
            &serve,
            bad,
            &session,
            9,
            json!({"name": "echo", "arguments": {}}),
            &[],
        )
        .await;
        assert_eq!(answer.status, 401, "{}", answer.body);
    }
    // Secrets as argument values are recorded redacted.
    let github = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let answer = call(&serve, &ada, &session, 1, json!({"name": "echo", "arguments": {"text": format!("{token} {github}"), "plain": "kept"}}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let found = wait_lines(&setup.log(), 2).await;
    let text = std::fs::read_to_string(setup.log()).unwrap();
    assert_eq!(
        found[1]["arguments"]["plain"], "kept",
        "the channel is alive: {text}"
    );
    for secret in [
        &token,
        github,
        forged.as_str(),
        expired.as_str(),
        elsewhere.as_str(),
    ] {
        let secret = secret.trim_start_matches("Bearer ");
        assert!(!text.contains(secret), "a secret in the audit log: {text}");
    }
}
