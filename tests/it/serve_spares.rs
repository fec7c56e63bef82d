//! `--spare-children`: children started ahead, taken by new sessions (their `initialize`
//! answered by a process that was already running), replaced when taken or when they die,
//! counted against `--max-sessions`, and ended with serve; under `--config`, a budget for the
//! listener that follows each server's use (`--spare-budget`, `--spare-idle-ttl`).

use std::time::Instant;

use serde_json::json;

use crate::common::serve::{Serve, alive, children_of, wait_dead};
use crate::common::{DEADLINE, eventually};

/// Waits (with the deadline) until `/metrics` shows `n` spares.
async fn wait_spares(serve: &Serve, n: u64) {
    wait_for("spares", n, serve, || {
        serve.gauge("mcp_stdio_spare_children")
    })
    .await;
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

/// The sum over servers of a family `/metrics` labels by server (`--config`).
async fn labelled_total(serve: &Serve, family: &str) -> u64 {
    let metrics = serve.send("GET", "/metrics", &[], "").await;
    metrics
        .body
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// One server's value of a family `/metrics` labels by server.
async fn labelled_one(serve: &Serve, family: &str, server: &str) -> u64 {
    let metrics = serve.send("GET", "/metrics", &[], "").await;
    let prefix = format!("{family}{{server=\"{server}\"}} ");
    metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in {}", metrics.body))
}

/// Waits (with the deadline) until `probe` gives `want`.
async fn wait_for<F, Fut>(what: &str, want: u64, serve: &Serve, probe: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    eventually(&format!("{what} is {want}"), async || {
        let now = probe().await;
        (now == want)
            .then_some(())
            .ok_or_else(|| format!("{now}; stderr:\n{}", serve.stderr()))
    })
    .await
}

/// Opens a session on the config file's server `server`.
async fn open(serve: &Serve, server: &str) -> crate::common::serve::Answer {
    let path = format!("/{server}/mcp");
    let answer = serve
        .send("POST", &path, &[], &crate::common::serve::initialize_body())
        .await;
    assert_eq!(answer.status, 200, "{server}: {}", answer.body);
    answer
}

/// Ends a session on the config file's server `server`.
async fn close(serve: &Serve, server: &str, session: &str) {
    let path = format!("/{server}/mcp");
    let ended = serve
        .send("DELETE", &path, &[("mcp-session-id", session)], "")
        .await;
    assert!(ended.status < 300, "{server}: {}", ended.body);
}

async fn start_config(file: &std::path::Path, flags: &[&str]) -> Serve {
    let mut command = tokio::process::Command::new(crate::common::binary());
    command
        .args(["serve", "--port", "0", "--log-level", "debug", "--config"])
        .arg(file)
        .args(flags);
    Serve::spawn(command).await
}

/// Under `--config` spares are a budget for the listener: ten servers hold no idle process
/// before the first client; a used server gets warm spares within `--spare-budget`, which
/// its next session takes; they end after `--spare-idle-ttl` without a new session; and an
/// entry that sets `spare_children` keeps its own from the start.
#[tokio::test]
async fn under_config_spares_follow_use_within_the_listeners_budget() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    let mut config = String::new();
    for n in 0..10 {
        config.push_str(&format!(
            "[servers.s{n}]\ncommand = {:?}\n",
            crate::common::serve::fixture()
        ));
    }
    std::fs::write(&file, &config).unwrap();
    let serve = start_config(&file, &["--spare-idle-ttl", "2"]).await;
    let pid = serve.child.id().unwrap();
    // Before the first client: every server is listed, and none holds a process.
    let metrics = serve.send("GET", "/metrics", &[], "").await;
    let listed = metrics
        .body
        .lines()
        .filter(|l| l.starts_with("mcp_stdio_spare_children{"))
        .count();
    assert_eq!(listed, 10, "{}", metrics.body);
    assert_eq!(labelled_total(&serve, "mcp_stdio_spare_children").await, 0);
    assert_eq!(children_of(pid).len(), 0);
    // The keeper is alive: a used server's spares appear at once (and the nine others,
    // which had all this time, still hold none).
    let probe = open(&serve, "s0").await;
    let s0 = probe.session();
    wait_for("spares of s0", 2, &serve, || {
        labelled_one(&serve, "mcp_stdio_spare_children", "s0")
    })
    .await;
    // One session and the budget's two spares: three children for ten servers.
    assert_eq!(labelled_total(&serve, "mcp_stdio_spare_children").await, 2);
    for n in 1..10 {
        let server = format!("s{n}");
        assert_eq!(
            labelled_one(&serve, "mcp_stdio_spare_children", &server).await,
            0
        );
    }
    wait_for("children", 3, &serve, || async {
        children_of(pid).len() as u64
    })
    .await;
    // Another server used while the budget is spent: its session starts cold, no spare
    // of its own appears, and s0's stay.
    open(&serve, "s5").await;
    let (_, warm) = last_session(&serve.stderr());
    assert!(!warm, "s5 had no spare: {}", serve.stderr());
    assert_eq!(
        labelled_one(&serve, "mcp_stdio_spare_children", "s5").await,
        0
    );
    // s0's next session is warm.
    let again = open(&serve, "s0").await;
    let (_, warm) = last_session(&serve.stderr());
    assert!(warm, "s0's second session took a spare: {}", serve.stderr());
    let answer = serve
        .send(
            "POST",
            "/s0/mcp",
            &[("mcp-session-id", &s0)],
            &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}).to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // A server with open sessions is in use: its spares stay past the idle ttl. s7, used
    // and left after s0's last session started, is unused one ttl later; by then s0 has
    // been quiet longer than that.
    let s7 = open(&serve, "s7").await;
    close(&serve, "s7", &s7.session()).await;
    crate::common::wait_logged(
        || serve.stderr(),
        "server{name=s7}: no session for --spare-idle-ttl",
    )
    .await;
    assert_eq!(
        labelled_one(&serve, "mcp_stdio_spare_children", "s0").await,
        2
    );
    // Its sessions end; two seconds without one: the idle spares end.
    for session in [s0.clone(), again.session()] {
        close(&serve, "s0", &session).await;
    }
    wait_for("spares after the idle ttl", 0, &serve, || {
        labelled_total(&serve, "mcp_stdio_spare_children")
    })
    .await;
    wait_for(
        "children after the idle ttl (s5's session)",
        1,
        &serve,
        || async { children_of(pid).len() as u64 },
    )
    .await;
    assert!(
        serve.stderr().contains("no session for --spare-idle-ttl"),
        "{}",
        serve.stderr()
    );
    drop(serve);

    // An entry that asks for spares keeps them from the start, within the budget.
    let mut config = String::new();
    for n in 0..10 {
        let extra = if n == 3 { "spare_children = 5\n" } else { "" };
        config.push_str(&format!(
            "[servers.s{n}]\ncommand = {:?}\n{extra}",
            crate::common::serve::fixture()
        ));
    }
    std::fs::write(&file, &config).unwrap();
    let serve = start_config(&file, &["--spare-budget", "3"]).await;
    wait_for("s3's spares from the start", 3, &serve, || {
        labelled_one(&serve, "mcp_stdio_spare_children", "s3")
    })
    .await;
    let pid = serve.child.id().unwrap();
    wait_for("children", 3, &serve, || async {
        children_of(pid).len() as u64
    })
    .await;
    assert_eq!(labelled_total(&serve, "mcp_stdio_spare_children").await, 3);
}

#[tokio::test]
async fn the_spare_budget_flags_go_with_config_only() {
    for flags in [
        ["--spare-budget", "4"],
        ["--spare-idle-ttl", "10"],
        ["--spare-yield-after", "1"],
    ] {
        let done = std::process::Command::new(crate::common::binary())
            .args(["serve", "--port", "0"])
            .args(flags)
            .args(["--", crate::common::serve::fixture().as_str()])
            .output()
            .unwrap();
        assert_eq!(done.status.code(), Some(2), "{flags:?}");
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(stderr.contains("go with --config"), "{stderr}");
    }
}

/// A server that found the budget spent gets it from one that has been quiet for
/// `--spare-yield-after`: the busy server's next session is warm.
#[tokio::test]
async fn a_quiet_server_gives_its_spares_to_a_busier_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    let mut config = String::new();
    for name in ["quiet", "busy"] {
        config.push_str(&format!(
            "[servers.{name}]\ncommand = {:?}\n",
            crate::common::serve::fixture()
        ));
    }
    std::fs::write(&file, &config).unwrap();
    let serve = start_config(&file, &["--spare-yield-after", "1"]).await;
    let first = open(&serve, "quiet").await;
    wait_for("the quiet server's spares", 2, &serve, || {
        labelled_one(&serve, "mcp_stdio_spare_children", "quiet")
    })
    .await;
    // Its session ends, so it is idle, not in use.
    close(&serve, "quiet", &first.session()).await;
    open(&serve, "busy").await;
    wait_for("the busy server's spares", 2, &serve, || {
        labelled_one(&serve, "mcp_stdio_spare_children", "busy")
    })
    .await;
    assert_eq!(
        labelled_one(&serve, "mcp_stdio_spare_children", "quiet").await,
        0
    );
    // The reason is logged as the quiet server lets its spares go, which the gauge may
    // show a moment before the line reaches its stderr reader.
    crate::common::eventually("the reason for giving the spares away", async || {
        let stderr = serve.stderr();
        stderr
            .contains("a busier server found the --spare-budget spent")
            .then_some(())
            .ok_or(stderr)
    })
    .await;
    open(&serve, "busy").await;
    let (_, warm) = last_session(&serve.stderr());
    assert!(warm, "{}", serve.stderr());
}
