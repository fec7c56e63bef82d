//! `--spare-children`: children started ahead, taken by new sessions (their `initialize`
//! answered by a process that was already running), replaced when taken or when they die,
//! counted against `--max-sessions`, and ended with serve.

use std::time::Instant;

use serde_json::json;

use crate::common::DEADLINE;
use crate::common::serve::{Serve, alive, wait_dead};

/// Waits (with the deadline) until `/metrics` shows `n` spares.
async fn wait_spares(serve: &Serve, n: u64) {
    let start = Instant::now();
    while serve.gauge("mcp_stdio_spare_children").await != n {
        assert!(
            start.elapsed() < DEADLINE,
            "never {n} spares: {}",
            serve.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The pids of the spares started so far, in order (from the log).
fn spare_pids(log: &str) -> Vec<i32> {
    log.lines()
        .filter(|l| l.contains("spare child started"))
        .filter_map(|l| l.split("pid=").nth(1))
        .filter_map(|p| p.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The pid of the last session started, and whether it was warm.
fn last_session(log: &str) -> (i32, bool) {
    let line = log
        .lines()
        .rfind(|l| l.contains("session started"))
        .expect("a session started");
    let pid = line
        .split("pid=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    (pid.parse().unwrap(), line.contains("warm=true"))
}

#[tokio::test]
async fn a_new_session_takes_a_warm_spare_which_is_replaced_even_when_it_dies() {
    let mut serve = Serve::start(&["--spare-children", "2"]).await;
    wait_spares(&serve, 2).await;
    let first_two = spare_pids(&serve.stderr());
    assert_eq!(first_two.len(), 2);
    assert!(first_two.iter().all(|pid| alive(*pid)));

    let session = serve.initialize().await;
    let (pid, warm) = last_session(&serve.stderr());
    assert!(warm, "{}", serve.stderr());
    assert_eq!(
        pid, first_two[0],
        "the oldest spare, already running, took the session"
    );
    let answer = serve.call(&session, 1, "echo", json!({"text": "hi"})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    wait_spares(&serve, 2).await;
    assert_eq!(
        spare_pids(&serve.stderr()).len(),
        3,
        "one started to replace it"
    );

    // A spare that dies is replaced.
    let idle = first_two[1];
    std::process::Command::new("kill")
        .args(["-9", &idle.to_string()])
        .status()
        .unwrap();
    wait_dead(idle).await;
    let start = Instant::now();
    while spare_pids(&serve.stderr()).len() < 4 {
        assert!(
            start.elapsed() < DEADLINE,
            "the dead spare was not replaced: {}",
            serve.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    wait_spares(&serve, 2).await;
    // The next session never gets the dead one.
    serve.initialize().await;
    let (pid, warm) = last_session(&serve.stderr());
    assert!(warm && pid != idle && alive(pid));

    // Serve's end ends its spares too.
    let spares: Vec<i32> = spare_pids(&serve.stderr())
        .into_iter()
        .filter(|p| alive(*p))
        .collect();
    assert!(!spares.is_empty());
    let serve_pid = serve.child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &serve_pid])
        .status()
        .unwrap();
    tokio::time::timeout(DEADLINE, serve.child.wait())
        .await
        .unwrap()
        .unwrap();
    for pid in spares {
        wait_dead(pid).await;
    }
}

#[tokio::test]
async fn spares_count_against_max_sessions() {
    let serve = Serve::start(&["--spare-children", "2", "--max-sessions", "3"]).await;
    wait_spares(&serve, 2).await;
    let first = serve.initialize().await;
    wait_spares(&serve, 2).await; // 1 session + 2 spares = 3
    serve.initialize().await; // takes a spare; 2 + 1 = 3: no room for another
    serve.initialize().await; // takes the last; 3 + 0
    assert_eq!(serve.gauge("mcp_stdio_spare_children").await, 0);
    assert_eq!(serve.gauge("mcp_stdio_children").await, 3);
    let full = serve
        .send(
            "POST",
            "/mcp",
            &[],
            &crate::common::serve::initialize_body(),
        )
        .await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert!(full.body.contains("--max-sessions"), "{}", full.body);
    // A session that ends makes room, and a spare takes it.
    let ended = serve
        .send("DELETE", "/mcp", &[("mcp-session-id", &first)], "")
        .await;
    assert_eq!(ended.status, 200);
    wait_spares(&serve, 1).await;
    assert_eq!(
        spare_pids(&serve.stderr()).len(),
        4,
        "2 at the start, 1 after the first session, 1 after the DELETE; none while full"
    );
    serve.initialize().await;
    assert!(last_session(&serve.stderr()).1, "it went to the spare");
}

#[tokio::test]
async fn zero_spares_means_none() {
    let serve = Serve::start(&["--spare-children", "0"]).await;
    serve.initialize().await;
    assert!(!last_session(&serve.stderr()).1, "a cold start");
    assert_eq!(serve.gauge("mcp_stdio_spare_children").await, 0);
    assert!(spare_pids(&serve.stderr()).is_empty());
}
