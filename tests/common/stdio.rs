//! The one stdio driver: a child process of the binary (the relay, the sandbox) spoken to
//! over its stdin and stdout, its stderr kept for assertions. Every wait has a deadline.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::{DEADLINE, wait_logged};

pub struct StdioPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<String>>,
}

impl StdioPeer {
    /// Starts `command` with piped standard streams (killed when dropped).
    pub fn spawn(mut command: tokio::process::Command) -> Self {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn the binary");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        StdioPeer {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    /// The next line on stdout, raw.
    pub async fn recv_line(&mut self) -> String {
        match tokio::time::timeout(DEADLINE, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!(
                "no line from the child ({other:?}); stderr:\n{}",
                self.stderr()
            ),
        }
    }

    pub async fn recv(&mut self) -> Value {
        let line = self.recv_line().await;
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Sends a request and returns its answer, failing on anything else in between.
    pub async fn call(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self.recv().await;
        assert_eq!(answer["id"], id, "unexpected message: {answer}");
        answer
    }

    /// Proves the channel is alive: a ping must be the next thing answered. Returns every
    /// line that came before the answer (a test of "nothing else arrived" checks it).
    pub async fn ping_through(&mut self, id: &str) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
            .await;
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message["id"] == json!(id) && message.get("result").is_some() {
                return before;
            }
            before.push(message);
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the child exits")
            .unwrap()
    }

    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().unwrap().to_string();
        std::process::Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .unwrap();
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (with the deadline) until the relay has logged `needle`.
    pub async fn wait_stderr(&self, needle: &str) {
        wait_logged(|| self.stderr(), needle).await;
    }

    /// Everything left on stdout after exit.
    pub async fn rest_of_stdout(&mut self) -> Vec<String> {
        let mut rest = Vec::new();
        while let Ok(Ok(Some(line))) = tokio::time::timeout(DEADLINE, self.stdout.next_line()).await
        {
            rest.push(line);
        }
        rest
    }
}
