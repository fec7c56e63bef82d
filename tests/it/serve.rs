//! `mcp-stdio serve` against the stdio fixture server (`examples/stdio_fixture.rs`), driven
//! over real HTTP on 127.0.0.1. Every wait has a deadline.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::serve::*;

#[tokio::test]
async fn sessions_answers_and_status_codes() {
    let serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    assert_eq!(session.len(), 32);
    assert!(session.bytes().all(|b| b.is_ascii_hexdigit()));

    let echo = serve
        .call(&session, 1, "echo", json!({"text": "grüße"}))
        .await;
    assert_eq!(echo.status, 200);
    assert_eq!(echo.headers["content-type"], "application/json");
    assert_eq!(echo.json()["result"]["content"][0]["text"], "grüße");

    let no_session = serve
        .post(None, json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    assert_eq!(no_session.status, 400, "{}", no_session.body);
    let unknown = serve
        .post(
            Some("0123456789abcdef0123456789abcdef"),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}),
        )
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(serve.send("POST", "/other", &[], "{}").await.status, 404);
    assert_eq!(serve.send("PUT", "/mcp", &[], "{}").await.status, 405);
    // The path matches ASCII case-insensitively.
    let upper = serve
        .send(
            "POST",
            "/MCP",
            &[("mcp-session-id", &session)],
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
        )
        .await;
    assert_eq!(upper.status, 200, "{}", upper.body);
    let notification = serve
        .post(
            Some(&session),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        )
        .await;
    assert_eq!(notification.status, 202);
    assert_eq!(
        serve.send("POST", "/mcp", &[], "not json").await.status,
        400
    );

    let pid: i32 = serve.call(&session, 5, "whoami", json!({})).await.json()["result"]["content"]
        [0]["text"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let deleted = serve
        .send("DELETE", "/mcp", &[("mcp-session-id", &session)], "")
        .await;
    assert_eq!(deleted.status, 200);
    wait_dead(pid).await;
    let after = serve.call(&session, 6, "echo", json!({})).await;
    assert_eq!(after.status, 404, "an ended session is gone");
}

#[tokio::test]
async fn a_requests_notifications_and_questions_stream_before_its_answer() {
    let serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    let progress = serve
        .post(Some(&session), json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"p"}}}))
        .await;
    assert_eq!(progress.headers["content-type"], "text/event-stream");
    let events = progress.events();
    assert_eq!(events.len(), 4, "{}", progress.body);
    assert_eq!(events[0]["params"]["progress"], 1);
    assert_eq!(events[3]["result"]["content"][0]["text"], "progressed");

    // The server asks the client something mid-call; the answer is POSTed back.
    let ask = {
        let request = http::Request::builder()
            .method("POST")
            .uri(&serve.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .body(Full::new(Bytes::from(
                json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}})
                    .to_string(),
            )))
            .unwrap();
        serve.http.request(request).await.unwrap()
    };
    let mut body = ask.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s: &str| {
        s.contains("elicitation/create")
    })
    .await;
    let question: Value =
        serde_json::from_str(seen.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    let reply = serve
        .post(Some(&session), json!({"jsonrpc":"2.0","id":question["id"],"result":{"action":"accept","content":{"name":"Ada"}}}))
        .await;
    assert_eq!(reply.status, 202);
    read_until(&mut body, &mut seen, |s: &str| s.contains("asked: Ada")).await;
}

#[tokio::test]
async fn requests_on_one_session_run_concurrently_and_a_reused_id_conflicts() {
    let serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    let slow = serve.call(&session, 1, "slow", json!({"ms": 1500}));
    let quick = async {
        serve.wait_pending(1).await;
        let echo = serve
            .call(&session, 2, "echo", json!({"text": "first"}))
            .await;
        let conflict = serve
            .call(&session, 1, "echo", json!({"text": "other body"}))
            .await;
        (echo, conflict, Instant::now())
    };
    let (slow, (echo, conflict, quick_done)) =
        tokio::join!(async { (slow.await, Instant::now()) }, quick);
    assert_eq!(echo.json()["result"]["content"][0]["text"], "first");
    assert_eq!(conflict.status, 409, "{}", conflict.body);
    assert!(
        quick_done < slow.1,
        "the quick call did not wait for the slow one"
    );
    assert_eq!(slow.0.json()["result"]["content"][0]["text"], "slept");
}

#[tokio::test]
async fn chunked_bodies_are_read() {
    let serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    let body = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"chunked"}}}).to_string();
    let (a, b) = body.split_at(20);
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", serve.port))
        .await
        .unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        serve.port,
        a.len(),
        b.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(DEADLINE, stream.read_to_string(&mut response))
        .await
        .unwrap()
        .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""text":"chunked""#), "{response}");
}

#[tokio::test]
async fn the_get_stream_carries_unrelated_messages_with_ids_and_resumes() {
    let serve = Serve::start(&["--keepalive", "0.2"]).await;
    let session = serve.initialize().await;
    let response = serve.open_stream(&session, None).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    serve.call(&session, 1, "announce", json!({})).await;
    serve.call(&session, 2, "announce", json!({})).await;
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s: &str| {
        s.matches("list_changed").count() >= 2 && s.contains(": keepalive")
    })
    .await;
    let ids: Vec<&str> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids, ["1", "2"], "{seen}");
    drop(body);
    // Resuming after event 1 replays event 2 only.
    let resumed = serve.open_stream(&session, Some("1")).await;
    let mut body = resumed.into_body();
    let mut again = String::new();
    read_until(&mut body, &mut again, |s: &str| s.contains("list_changed")).await;
    assert!(
        again.contains("id: 2") && !again.contains("id: 1\n"),
        "{again}"
    );
}

#[tokio::test]
async fn a_crashed_child_fails_its_requests_and_ends_the_session() {
    let serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    let slow = serve.call(&session, 1, "slow", json!({"ms": 5000}));
    let crash = async {
        serve.wait_pending(1).await;
        serve.call(&session, 2, "crash", json!({})).await
    };
    let (slow, crash) = tokio::join!(slow, crash);
    for answer in [&slow, &crash] {
        assert_eq!(answer.json()["error"]["code"], -32603, "{}", answer.body);
        assert!(answer.body.contains("exited"), "{}", answer.body);
    }
    serve.wait_stderr("; the session is over").await;
    let after = serve.call(&session, 3, "echo", json!({})).await;
    assert_eq!(after.status, 404);
}

#[tokio::test]
async fn idle_sessions_are_reaped_with_their_children_and_grandchildren() {
    let serve = Serve::start(&["--session-idle-ttl", "1"]).await;
    let session = serve.initialize().await;
    let grandchild: i32 = serve
        .call(&session, 1, "grandchild", json!({}))
        .await
        .json()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let child: i32 = serve.call(&session, 2, "whoami", json!({})).await.json()["result"]["content"]
        [0]["text"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    serve
        .wait_stderr("session idle for --session-idle-ttl")
        .await;
    wait_dead(child).await;
    wait_dead(grandchild).await;
    assert_eq!(serve.call(&session, 3, "echo", json!({})).await.status, 404);
}

/// A session has an end however busy it is; its id then answers 404
/// like an unknown one and its child is gone.
#[tokio::test]
async fn a_session_ends_at_its_max_age_even_while_streaming() {
    let serve = Serve::start(&["--session-max-age", "3", "--session-idle-ttl", "0"]).await;
    let session = serve.initialize().await;
    let child: i32 = serve.call(&session, 1, "whoami", json!({})).await.json()["result"]["content"]
        [0]["text"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // An open GET stream keeps it busy: idleness would never end it.
    let mut stream = serve.open_stream(&session, None).await.into_body();
    assert_eq!(serve.call(&session, 2, "echo", json!({})).await.status, 200);
    serve
        .wait_stderr("session reached --session-max-age; ending it")
        .await;
    wait_dead(child).await;
    assert_eq!(serve.call(&session, 3, "echo", json!({})).await.status, 404);
    // The stream ended with it.
    let mut seen = String::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        use http_body_util::BodyExt;
        while let Some(Ok(frame)) = stream.frame().await {
            if let Ok(data) = frame.into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .expect("the stream closes when its session ends");
    // A new session works as before.
    let again = serve.initialize().await;
    assert_eq!(serve.call(&again, 4, "echo", json!({})).await.status, 200);
}

#[tokio::test]
async fn origin_and_host_guards() {
    let serve = Serve::start(&["--allow-origin", "https://claude.ai"]).await;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    assert_eq!(
        serve
            .send("POST", "/mcp", &[("origin", "https://evil.example")], init)
            .await
            .status,
        403
    );
    assert_eq!(
        serve
            .send("POST", "/mcp", &[("host", "attacker.example")], init)
            .await
            .status,
        403
    );
    assert_eq!(
        serve
            .send("POST", "/mcp", &[("origin", "https://claude.ai")], init)
            .await
            .status,
        200
    );
    assert_eq!(
        serve
            .send("POST", "/mcp", &[("origin", "http://localhost:5173")], init)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_bearer_guards_the_endpoint_and_metadata_says_so() {
    let serve = Serve::start_with(
        &[],
        &[fixture().as_str()],
        &[("MCP_STDIO_SERVE_TOKEN", "s3cret-token")],
    )
    .await;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let refused = serve.send("POST", "/mcp", &[], init).await;
    assert_eq!(refused.status, 401);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(&format!(
            r#"resource_metadata="http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp""#,
            serve.port
        )),
        "{challenge}"
    );
    assert_eq!(
        serve
            .send("POST", "/mcp", &[("authorization", "Bearer wrong")], init)
            .await
            .status,
        401
    );
    let prm = serve
        .send("GET", "/.well-known/oauth-protected-resource/mcp", &[], "")
        .await;
    assert_eq!(
        prm.json()["resource"],
        format!("http://127.0.0.1:{}/mcp", serve.port)
    );
    let ok = serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", "Bearer s3cret-token")],
            init,
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(serve.send("GET", "/metrics", &[], "").await.status, 401);
    let metrics = serve
        .send(
            "GET",
            "/metrics",
            &[("authorization", "bearer s3cret-token")],
            "",
        )
        .await;
    assert!(
        metrics.body.contains("mcp_stdio_sessions 1"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains(r#"method="initialize",status="200""#),
        "{}",
        metrics.body
    );
    assert!(
        !serve.stderr().contains("s3cret-token"),
        "the token is never logged"
    );
}

#[tokio::test]
async fn bounds_sessions_body_size_and_health() {
    let serve = Serve::start(&["--max-sessions", "1", "--max-message-size", "1024"]).await;
    assert_eq!(serve.send("GET", "/healthz", &[], "").await.status, 200);
    assert_eq!(serve.send("GET", "/readyz", &[], "").await.status, 200);
    let session = serve.initialize().await;
    let second = serve
        .post(None, json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    assert_eq!(second.status, 503, "{}", second.body);
    assert_eq!(serve.send("GET", "/readyz", &[], "").await.status, 503);
    let big = serve
        .call(&session, 1, "echo", json!({"text": "x".repeat(2000)}))
        .await;
    assert_eq!(big.status, 413);
}

#[tokio::test]
async fn sigterm_ends_every_child_and_exits_zero() {
    let mut serve = Serve::start(&[]).await;
    let session = serve.initialize().await;
    let child: i32 = serve.call(&session, 1, "whoami", json!({})).await.json()["result"]["content"]
        [0]["text"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let pid = serve.child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-s", "TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(DEADLINE, serve.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", serve.stderr());
    wait_dead(child).await;
}

#[test]
fn bad_serve_flags_exit_2_naming_the_flag() {
    for (args, needle) in [
        (vec!["serve", "--port", "70000", "--", "sh"], "--port"),
        (
            vec!["serve", "--max-sessions", "0", "--", "sh"],
            "--max-sessions",
        ),
        (vec!["serve", "--path", "mcp", "--", "sh"], "--path"),
        (
            vec!["serve", "--trusted-proxy", "nonsense", "--", "sh"],
            "--trusted-proxy",
        ),
        (
            vec![
                "serve",
                "--allow-origin",
                "https://a.example/path",
                "--",
                "sh",
            ],
            "--allow-origin",
        ),
        (
            vec!["serve", "--", "/nonexistent/mcp-server"],
            "cannot find the command",
        ),
    ] {
        let (code, stdout, stderr) = crate::common::run_to_end(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(stdout.is_empty());
    }
}

#[tokio::test]
async fn sessions_are_isolated_each_with_its_own_child() {
    let serve = Serve::start(&[]).await;
    let a = serve.initialize().await;
    let b = serve.initialize().await;
    assert_ne!(a, b);
    let pid = |answer: Answer| {
        answer.json()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let pid_a = pid(serve.call(&a, 1, "whoami", json!({})).await);
    let pid_b = pid(serve.call(&b, 1, "whoami", json!({})).await);
    assert_ne!(pid_a, pid_b, "one child per session");
    // The same request id on two sessions is two requests.
    let (one, two) = tokio::join!(
        serve.call(&a, 7, "echo", json!({"text": "a"})),
        serve.call(&b, 7, "echo", json!({"text": "b"}))
    );
    assert_eq!(one.json()["result"]["content"][0]["text"], "a");
    assert_eq!(two.json()["result"]["content"][0]["text"], "b");
}

#[tokio::test]
async fn the_request_bounds_answer_504_and_429() {
    let serve = Serve::start(&["--timeout-response", "1", "--max-requests-per-session", "1"]).await;
    let session = serve.initialize().await;
    let silent = serve.call(&session, 1, "slow", json!({"ms": 4000})).await;
    assert_eq!(silent.status, 504, "{}", silent.body);
    assert!(silent.body.contains("--timeout-response"));
    // The first slow call is forgotten by the gateway but still runs in the child; a new
    // one fills the single slot, and a second is refused.
    let (held, refused) =
        tokio::join!(serve.call(&session, 2, "slow", json!({"ms": 700})), async {
            serve.wait_pending(1).await;
            serve.call(&session, 3, "echo", json!({})).await
        });
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body.contains("--max-requests-per-session"));
    assert_eq!(held.status, 200);
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let serve = Serve::start(&["--timeout-headers", "0.3"]).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", serve.port))
        .await
        .unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    // The server closes the connection (with or without a 408) instead of waiting forever.
    tokio::time::timeout(DEADLINE, stream.read_to_end(&mut rest))
        .await
        .expect("the connection was closed")
        .unwrap();
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    // The server is still serving others.
    assert_eq!(serve.send("GET", "/healthz", &[], "").await.status, 200);
}

#[tokio::test]
async fn the_replay_buffer_keeps_only_the_newest_events() {
    let serve = Serve::start(&["--replay-buffer", "1"]).await;
    let session = serve.initialize().await;
    serve.call(&session, 1, "announce", json!({})).await;
    serve.call(&session, 2, "announce", json!({})).await;
    // Both announcements went to the buffer (no GET was open), the second pushing the first
    // out; resuming from the start finds only the newest.
    serve.wait_stderr("replay buffer is full").await;
    let start = Instant::now();
    loop {
        let request = http::Request::builder()
            .method("GET")
            .uri(&serve.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("last-event-id", "0")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let mut body = serve.http.request(request).await.unwrap().into_body();
        let frame = tokio::time::timeout(Duration::from_millis(500), body.frame()).await;
        if let Ok(Some(Ok(frame))) = frame
            && let Ok(data) = frame.into_data()
        {
            let text = String::from_utf8_lossy(&data).into_owned();
            assert!(
                text.contains("id: 2") && !text.contains("id: 1\n"),
                "{text}"
            );
            break;
        }
        assert!(start.elapsed() < DEADLINE, "no replayed event");
    }
}

#[tokio::test]
async fn with_no_command_serve_publishes_the_sandbox() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hello.txt"), "hello from the sandbox\n").unwrap();
    let mut cmd = tokio::process::Command::new(crate::common::binary());
    cmd.args(["serve", "--port", "0"]).current_dir(root.path());
    let serve = Serve::spawn(cmd).await;
    let session = serve.initialize().await;
    let read = serve
        .call(&session, 1, "read_file", json!({"path": "hello.txt"}))
        .await;
    assert_eq!(
        read.json()["result"]["structuredContent"]["content"],
        "hello from the sandbox\n",
        "{}",
        read.body
    );
    let outside = serve
        .call(
            &session,
            2,
            "read_file",
            json!({"path": "../../etc/passwd"}),
        )
        .await;
    assert_eq!(outside.json()["result"]["isError"], true);
}

/// The 2026-07-28 headers and envelope for one request.
#[tokio::test]
async fn a_child_that_stops_reading_gets_its_client_a_503_not_a_hang() {
    let serve = Serve::start(&["--child-queue", "1", "--timeout-response", "0.5"]).await;
    let session = serve.initialize().await;
    let deaf = serve.call(&session, 1, "deaf", json!({})).await;
    assert!(deaf.json().get("result").is_some(), "{}", deaf.body);
    // The child no longer reads: its pipe fills, then the one-message queue, then the
    // next message waits --timeout-response and is refused.
    let padding = "p".repeat(32 * 1024);
    let mut statuses = Vec::new();
    for _ in 0..128 {
        let note = serve
            .post(Some(&session), json!({"jsonrpc":"2.0","method":"notifications/message","params":{"padding": padding}}))
            .await;
        statuses.push(note.status);
        if note.status == 503 {
            assert!(note.body.contains("--child-queue (1)"), "{}", note.body);
            break;
        }
    }
    assert_eq!(
        statuses[0], 202,
        "the channel worked before it filled: {statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&503), "{statuses:?}");
}
