//! How the relay holds its standard streams: pipes are polled on the runtime's thread and
//! put back in blocking mode at exit, files go through threads, and a stdout shared with
//! stderr is never made non-blocking (logging would start failing).
#![cfg(unix)]

use std::io::{BufRead, Write};
use std::os::fd::AsFd;
use std::process::Stdio;

use crate::common::*;
use rustix::fs::{OFlags, fcntl_getfl};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

fn is_nonblocking(fd: impl AsFd) -> bool {
    fcntl_getfl(fd).unwrap().contains(OFlags::NONBLOCK)
}

fn line(message: Value) -> String {
    format!("{message}\n")
}

fn initialize_line() -> String {
    line(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": host_initialize_params()}),
    )
}

#[tokio::test]
async fn a_stdin_pipe_is_polled_while_the_relay_runs_and_left_blocking_after() {
    let upstream = Upstream::start(basic).await;
    let (reader, mut writer) = std::io::pipe().unwrap();
    // A second descriptor on the relay's stdin's open file description: it sees the flags
    // the relay sets, as a parent process sharing the pipe would.
    let shared = reader.try_clone().unwrap();
    assert!(!is_nonblocking(&shared));
    let mut child = relay_command(&upstream.url, &[])
        .stdin(Stdio::from(reader))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    writer.write_all(initialize_line().as_bytes()).unwrap();
    let answer = tokio::time::timeout(DEADLINE, stdout.next_line())
        .await
        .expect("an answer")
        .unwrap()
        .unwrap();
    assert!(answer.contains(r#""id":0"#), "{answer}");
    assert!(
        is_nonblocking(&shared),
        "stdin is polled by the runtime, not read on a thread"
    );

    drop(writer);
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("the relay exits at end of input")
        .unwrap();
    assert!(status.success());
    assert!(
        !is_nonblocking(&shared),
        "the relay put blocking mode back for whoever shares the pipe"
    );
}

// Multi-threaded: this test blocks on a std channel, and the fake upstream must keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_shared_with_stderr_stays_blocking_and_logs_keep_flowing() {
    let upstream = Upstream::start(basic).await;
    let (reader, writer) = std::io::pipe().unwrap();
    let shared = writer.try_clone().unwrap();
    let mut child = relay_command(&upstream.url, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(writer.try_clone().unwrap()))
        .stderr(Stdio::from(writer))
        .spawn()
        .unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, initialize_line().as_bytes())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + DEADLINE;
    let is_answer = |l: &String| l.starts_with('{') && l.contains(r#""id":0"#);
    while !seen.iter().any(is_answer) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(e) => panic!("no initialize answer ({e}); the pipe carried: {seen:#?}"),
        }
    }
    assert!(
        !is_nonblocking(&shared),
        "a stdout that is also stderr must stay blocking"
    );

    drop(stdin);
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("the relay exits at end of input")
        .unwrap();
    assert!(status.success());
    drop(shared);
    seen.extend(lines_rx.iter());
    assert!(
        seen.iter()
            .any(|l| l.contains("stdin closed; shutting down")),
        "logging still works after the answer: {seen:#?}"
    );
}

#[tokio::test]
async fn regular_files_as_stdin_and_stdout_go_through_threads() {
    let upstream = Upstream::start(basic).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let output = dir.path().join("out.jsonl");
    let script = [
        initialize_line(),
        line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        line(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})),
        line(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"})),
    ]
    .concat();
    std::fs::write(&input, script).unwrap();
    let status = relay_command(&upstream.url, &[])
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::fs::File::create(&output).unwrap())
        .stderr(Stdio::null())
        .status();
    let status = tokio::time::timeout(DEADLINE, status)
        .await
        .expect("the relay exits at end of the file")
        .unwrap();
    assert!(status.success());
    let written = std::fs::read_to_string(&output).unwrap();
    let mut ids: Vec<Value> = written
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone())
        .collect();
    ids.sort_by_key(|id| id.to_string());
    assert_eq!(ids, vec![json!("p"), json!(0), json!(1)], "{written}");
}
