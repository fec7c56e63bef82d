//! The fault suite, serve side: children and clients that misbehave on purpose, each in its
//! own test, with leaks read from `/proc` (file descriptors, child processes) and from
//! `/metrics` (live tasks, requests waiting for a child). `docs/architecture.md` ("Fault
//! suite") maps each fault to its test.

use std::time::{Duration, Instant};

use crate::common::eventually;
use crate::common::serve::*;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a serve process holds: its open file descriptors, its child processes, its live
/// tasks and the requests waiting for a child.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Holdings {
    fds: usize,
    children: usize,
    tasks: u64,
    pending: u64,
}

impl Holdings {
    async fn of(serve: &Serve) -> Self {
        let pid = serve.child.id().unwrap();
        Holdings {
            fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .count(),
            children: children_of(pid).len(),
            tasks: serve.gauge("mcp_stdio_tasks").await,
            pending: serve.gauge("mcp_stdio_pending_requests").await,
        }
    }

    /// Waits until what `serve` holds is `expected` again.
    async fn wait_back_to(serve: &Serve, expected: Holdings) {
        eventually(&format!("back to the baseline {expected:?}"), async || {
            let now = Holdings::of(serve).await;
            (now == expected).then_some(()).ok_or(format!("{now:?}"))
        })
        .await
    }
}

/// POSTs `body` to `/mcp` on a connection of its own, which the caller can read and then
/// drop to hang up mid-stream.
async fn raw_post(
    serve: &Serve,
    headers: &[(String, String)],
    body: &str,
) -> tokio::net::TcpStream {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
        serve.port,
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(body);
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", serve.port))
        .await
        .unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    socket
}

/// The text of a tool call's first content block.
fn text_of(answer: &Answer) -> Value {
    answer.json()["result"]["content"][0]["text"].clone()
}

/// A field of `/proc/PID/status`, such as `VmHWM` (kB) or `SigIgn` (a hex mask).
fn status_field(pid: u32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_owned())
        })
        .unwrap()
}

/// Opens and deletes `n` sessions, 8 at a time, on connections of their own that are closed
/// afterwards (so the gateway's connection tasks end too).
async fn churn(serve: &Serve, n: usize) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let url = serve.url.clone();
    let request = |method: &str, session: Option<&str>, body: String| {
        let mut builder = http::Request::builder()
            .method(method)
            .uri(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            builder = builder.header("mcp-session-id", session);
        }
        builder.body(Full::new(Bytes::from(body))).unwrap()
    };
    let (client, request) = (&client, &request);
    let one = move |_| async move {
        let opened = client
            .request(request("POST", None, initialize_body()))
            .await
            .unwrap();
        assert_eq!(opened.status(), 200);
        let session = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let deleted = client
            .request(request("DELETE", Some(&session), String::new()))
            .await
            .unwrap();
        assert!(deleted.status().is_success(), "{}", deleted.status());
    };
    let mut waves = futures_util::stream::iter(0..n)
        .map(one)
        .buffer_unordered(8);
    tokio::time::timeout(Duration::from_secs(120), async {
        while waves.next().await.is_some() {}
    })
    .await
    .expect("the churn finished");
}

#[tokio::test]
async fn churn_of_1000_sessions_returns_fds_tasks_and_children_to_baseline() {
    let serve = Serve::start(&["--spare-children", "2"]).await;
    churn(&serve, 8).await;
    // The baseline: warmed up, the two spares started, no session open, and the warm-up
    // sessions' children gone (a closed session's child takes its EOF grace to exit, so
    // the gauges settle before the kernel's child list does).
    let pid = serve.child.id().unwrap();
    eventually(
        "the spares are back and the warm-up children gone",
        async || {
            let spares = serve.gauge("mcp_stdio_spare_children").await;
            let sessions = serve.gauge("mcp_stdio_sessions").await;
            let children = children_of(pid).len();
            (spares == 2 && sessions == 0 && children == 2)
                .then_some(())
                .ok_or(format!(
                    "{spares} spares, {sessions} sessions, {children} children"
                ))
        },
    )
    .await;
    let baseline = Holdings::of(&serve).await;
    assert_eq!(baseline.children, 2, "{baseline:?}");
    churn(&serve, 1000).await;
    assert!(serve.gauge("mcp_stdio_sessions_created_total").await >= 1008);
    Holdings::wait_back_to(&serve, baseline).await;
}

#[tokio::test]
async fn a_legacy_client_that_disconnects_mid_stream_leaves_nothing_behind() {
    let serve = Serve::start(&["--spare-children", "0"]).await;
    let session = serve.initialize().await;
    let baseline = Holdings::of(&serve).await;
    // `ask` streams a question to the client and waits for the answer; the client reads
    // the question and hangs up.
    let body =
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask"}}).to_string();
    let mut socket = raw_post(&serve, &[("mcp-session-id".into(), session.clone())], &body).await;
    let mut seen = Vec::new();
    let question = tokio::time::timeout(DEADLINE, async {
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before the question");
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(line) = text.lines().find(|l| l.contains("elicitation/create")) {
                let data = line.split_once("data: ").unwrap().1;
                return serde_json::from_str::<Value>(data).unwrap();
            }
        }
    })
    .await
    .expect("the question in time");
    drop(socket);
    // A disconnect is not a cancellation (handshake era): the call runs on, and its answer,
    // when it comes, is dropped without a trace.
    assert_eq!(serve.gauge("mcp_stdio_pending_requests").await, 1);
    let reply = serve
        .post(Some(&session), json!({"jsonrpc":"2.0","id":question["id"],"result":{"action":"accept","content":{"name":"Ada"}}}))
        .await;
    assert_eq!(reply.status, 202);
    Holdings::wait_back_to(&serve, baseline).await;
    // The session is still whole.
    let echo = serve
        .call(&session, 8, "echo", json!({"text": "still here"}))
        .await;
    assert_eq!(text_of(&echo), "still here");
}

#[tokio::test]
async fn a_modern_client_that_disconnects_cancels_its_call_and_frees_it_at_once() {
    let serve = Serve::start(&["--spare-children", "0", "--log-level", "debug"]).await;
    // Warm the pool: the backend for the anonymous principal exists from here on.
    let warm = serve
        .modern(
            json!(1),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "w"}}),
            Some("echo"),
        )
        .await;
    assert_eq!(warm.status, 200, "{}", warm.body);
    let baseline = Holdings::of(&serve).await;
    let (headers, body) = modern_request(
        json!(2),
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 60000}}),
        Some("slow"),
    );
    let socket = raw_post(&serve, &headers, &body).await;
    serve.wait_pending(1).await;
    drop(socket);
    // Long before the 60 s call could end, nothing of it is left.
    Holdings::wait_back_to(&serve, baseline).await;
    serve.wait_stderr("cancelled in the child").await;
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_and_eof_is_killed_after_the_grace() {
    // The child ignores SIGTERM and, once the fixture exits on EOF, stays as `sleep`.
    let fixture = fixture();
    let serve = Serve::start_with(
        &["--spare-children", "0", "--child-grace", "0.3"],
        &["sh", "-c", "trap '' TERM; \"$0\"; exec sleep 300", &fixture],
        &[],
    )
    .await;
    let session = serve.initialize().await;
    let serve_pid = serve.child.id().unwrap();
    let child = *children_of(serve_pid).first().expect("the child");
    let ignored = u64::from_str_radix(&status_field(child, "SigIgn"), 16).unwrap();
    assert_ne!(
        ignored & (1 << (15 - 1)),
        0,
        "the child really ignores SIGTERM"
    );
    let ended = Instant::now();
    let deleted = serve
        .send("DELETE", "/mcp", &[("mcp-session-id", &session)], "")
        .await;
    assert!(deleted.status < 300, "{}", deleted.status);
    wait_dead(child as i32).await;
    // EOF, then SIGTERM, each given the grace, then SIGKILL.
    assert!(
        ended.elapsed() >= Duration::from_millis(600),
        "{:?}",
        ended.elapsed()
    );
    assert!(children_of(serve_pid).is_empty());

    // At shutdown the same: serve still exits, and takes such a child with it.
    let _second = serve.initialize().await;
    let child = *children_of(serve_pid).first().expect("the second child");
    let mut serve = serve;
    std::process::Command::new("kill")
        .args(["-s", "TERM", &serve_pid.to_string()])
        .status()
        .unwrap();
    let status = tokio::time::timeout(DEADLINE, serve.child.wait())
        .await
        .expect("serve exits")
        .unwrap();
    assert!(status.success(), "{status}");
    wait_dead(child as i32).await;
}

#[tokio::test]
async fn a_child_that_floods_stdout_with_non_json_still_answers_and_the_log_stays_short() {
    let serve = Serve::start(&["--spare-children", "0"]).await;
    let session = serve.initialize().await;
    let answer = serve
        .call(&session, 1, "noise", json!({"lines": 20000}))
        .await;
    assert_eq!(text_of(&answer), "after the noise", "{}", answer.body);
    serve.wait_stderr("(10000 so far)").await;
    let warnings = serve
        .stderr()
        .matches("is not JSON-RPC on stdout; skipped")
        .count();
    assert!(warnings <= 8, "{warnings} warnings for 20000 lines");
}

#[tokio::test]
async fn a_100_mib_line_from_the_child_is_skipped_without_being_held() {
    let serve = Serve::start(&["--spare-children", "0"]).await;
    let session = serve.initialize().await;
    let answer = serve
        .call(&session, 1, "noise", json!({"bytes": 100u64 << 20}))
        .await;
    assert_eq!(text_of(&answer), "after the noise", "{}", answer.body);
    serve
        .wait_stderr("a message over --max-message-size on stdout; skipped")
        .await;
    let peak_kib: u64 = status_field(serve.child.id().unwrap(), "VmHWM")
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    assert!(
        peak_kib < 64 * 1024,
        "serve's peak RSS {peak_kib} KiB: the line was held"
    );
}
