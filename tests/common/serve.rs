//! A driver for `mcp-stdio serve` in front of the stdio fixture server
//! (`examples/stdio_fixture.rs`), over real HTTP on 127.0.0.1. Every wait has a deadline.

use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

pub use super::DEADLINE;

pub fn fixture() -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    dir.join("examples")
        .join("stdio_fixture")
        .to_string_lossy()
        .into_owned()
}

pub struct Serve {
    pub child: tokio::process::Child,
    pub url: String,
    pub port: u16,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// What serve wrote to stdout (only an audit log sent there: `--audit-log -`).
    pub stdout: std::sync::Arc<std::sync::Mutex<String>>,
    pub http: Client<HttpConnector, Full<Bytes>>,
}

pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    /// The `data:` payloads of an SSE body.
    pub fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }
    pub fn session(&self) -> String {
        self.headers["mcp-session-id"].to_str().unwrap().to_owned()
    }
}

impl Serve {
    pub async fn start(flags: &[&str]) -> Self {
        Self::start_with(flags, &[fixture().as_str()], &[]).await
    }

    pub async fn start_with(flags: &[&str], command: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = tokio::process::Command::new(super::binary());
        cmd.arg("serve");
        if !flags.contains(&"--port") {
            cmd.args(["--port", "0"]);
        }
        cmd.args(flags).arg("--").args(command);
        cmd.env_remove("MCP_STDIO_SERVE_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn(cmd).await
    }

    /// `mcp-stdio serve --config FILE` (debug logging, no serve token from the test's
    /// environment) with `flags` and `env`.
    pub async fn start_config(
        file: &std::path::Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut command = tokio::process::Command::new(super::binary());
        command
            .args(["serve", "--port", "0", "--log-level", "debug", "--config"])
            .arg(file)
            .args(flags)
            .env_remove("MCP_STDIO_SERVE_TOKEN");
        for (k, v) in env {
            command.env(k, v);
        }
        Self::spawn(command).await
    }

    /// Starts `cmd` (an `mcp-stdio serve` command line) and waits for the URL it serves.
    pub async fn spawn(mut cmd: tokio::process::Command) -> Self {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut out_lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let out_sink = stdout.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out_lines.next_line().await {
                let mut s = out_sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let url = tokio::time::timeout(DEADLINE, async {
            loop {
                let line = lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("serve exited before listening");
                stderr.lock().unwrap().push_str(&line);
                stderr.lock().unwrap().push('\n');
                if let Some(at) = line.find(" at http://") {
                    return line[at + 4..].split_whitespace().next().unwrap().to_owned();
                }
            }
        })
        .await
        .expect("serve printed its URL");
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let port = url
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Serve {
            child,
            url,
            port,
            stderr,
            stdout,
            http: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub async fn wait_stderr(&self, needle: &str) {
        super::wait_logged(|| self.stderr(), needle).await;
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        self.send_typed(method, path, "application/json", headers, body)
            .await
    }

    /// A `application/x-www-form-urlencoded` POST (the OAuth endpoints).
    pub async fn send_form(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        fields: &[(&str, &str)],
    ) -> Answer {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.send_typed(
            "POST",
            path,
            "application/x-www-form-urlencoded",
            headers,
            &body,
        )
        .await
    }

    pub async fn send_typed(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut all = vec![
            ("content-type", content_type),
            ("accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        self.send_exactly(method, path, &all, body).await
    }

    /// A request with these headers and no others (the strict request checks).
    pub async fn send_exactly(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("http://127.0.0.1:{}{path}", self.port));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let response = tokio::time::timeout(DEADLINE, self.http.request(request))
            .await
            .expect("an answer in time")
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = tokio::time::timeout(DEADLINE, response.into_body().collect())
            .await
            .expect("the whole body in time")
            .unwrap()
            .to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    pub async fn post(&self, session: Option<&str>, message: Value) -> Answer {
        let headers: Vec<(&str, &str)> =
            session.map(|s| ("mcp-session-id", s)).into_iter().collect();
        self.send("POST", "/mcp", &headers, &message.to_string())
            .await
    }

    /// A gauge or counter from `/metrics`.
    pub async fn gauge(&self, name: &str) -> u64 {
        self.gauge_with(name, &[]).await
    }

    /// A gauge or counter from `/metrics`, asked with `headers` (a token).
    pub async fn gauge_with(&self, name: &str, headers: &[(&str, &str)]) -> u64 {
        let metrics = self.send("GET", "/metrics", headers, "").await;
        metrics
            .body
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {}", metrics.body))
    }

    /// Waits until `n` requests are with the children and not answered yet (the
    /// `mcp_stdio_pending_requests` gauge): a call is in flight, not merely sent.
    pub async fn wait_pending(&self, n: u64) {
        super::eventually(&format!("{n} requests in flight"), async || {
            let now = self.gauge("mcp_stdio_pending_requests").await;
            (now == n).then_some(()).ok_or(format!("{now} in flight"))
        })
        .await
    }

    pub async fn initialize(&self) -> String {
        let answer = self.send("POST", "/mcp", &[], &initialize_body()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.session()
    }

    pub async fn call(&self, session: &str, id: u64, tool: &str, arguments: Value) -> Answer {
        self.post(Some(session), json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":arguments}}))
            .await
    }
}

/// A handshake-era `initialize` request, as a client opens a session with.
pub fn initialize_body() -> String {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
    .to_string()
}

/// `initialize` with `Authorization: Bearer TOKEN`.
pub async fn initialize_as(serve: &Serve, token: &str) -> Answer {
    let auth = format!("Bearer {token}");
    serve
        .send(
            "POST",
            "/mcp",
            &[("authorization", &auth)],
            &initialize_body(),
        )
        .await
}

/// Reads a streaming body into `seen` until `done` says it has what it waits for.
pub async fn read_until(
    body: &mut hyper::body::Incoming,
    seen: &mut String,
    done: impl Fn(&str) -> bool,
) {
    while !done(seen) {
        let frame = tokio::time::timeout(DEADLINE, body.frame())
            .await
            .expect("more of the stream in time")
            .expect("the stream went on")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
}

pub fn alive(pid: i32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

pub async fn wait_dead(pid: i32) {
    let start = Instant::now();
    while alive(pid) {
        assert!(start.elapsed() < DEADLINE, "process {pid} is still alive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn modern_request(
    id: Value,
    method: &str,
    params: Value,
    name: Option<&str>,
) -> (Vec<(String, String)>, String) {
    let params = super::modern::enveloped(params);
    let mut headers = vec![
        (
            "mcp-protocol-version".to_owned(),
            super::modern::MODERN.to_owned(),
        ),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name".to_owned(), name.to_owned()));
    }
    (
        headers,
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
    )
}

impl Serve {
    pub async fn modern(
        &self,
        id: Value,
        method: &str,
        params: Value,
        name: Option<&str>,
    ) -> Answer {
        self.modern_with(id, method, params, name, &[]).await
    }

    /// A 2026-07-28 request with `extra` headers besides the standard ones.
    pub async fn modern_with(
        &self,
        id: Value,
        method: &str,
        params: Value,
        name: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Answer {
        let (headers, body) = modern_request(id, method, params, name);
        let mut headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        headers.extend_from_slice(extra);
        self.send("POST", "/mcp", &headers, &body).await
    }

    /// Opens the session's GET stream (resuming after `last`, if given); its body is read by
    /// the caller.
    pub async fn open_stream(
        &self,
        session: &str,
        last: Option<&str>,
    ) -> http::Response<hyper::body::Incoming> {
        let mut request = http::Request::builder()
            .method("GET")
            .uri(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session);
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        let request = request.body(Full::new(Bytes::new())).unwrap();
        tokio::time::timeout(DEADLINE, self.http.request(request))
            .await
            .expect("the stream opened in time")
            .unwrap()
    }

    /// Opens a handshake-era request on `session` whose answer streams (with `extra`
    /// headers): its body is read by the caller.
    pub async fn open_request(
        &self,
        session: &str,
        extra: &[(&str, &str)],
        message: &Value,
    ) -> http::Response<hyper::body::Incoming> {
        let mut request = http::Request::builder()
            .method("POST")
            .uri(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", session);
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        let request = request
            .body(Full::new(Bytes::from(message.to_string())))
            .unwrap();
        tokio::time::timeout(DEADLINE, self.http.request(request))
            .await
            .expect("the request opened in time")
            .unwrap()
    }

    /// Opens a 2026-07-28 request whose answer streams: its body is read by the caller.
    pub async fn open_modern(
        &self,
        id: Value,
        method: &str,
        params: Value,
    ) -> http::Response<hyper::body::Incoming> {
        self.open_modern_with(id, method, params, &[]).await
    }

    /// [`Serve::open_modern`] with `extra` headers besides the standard ones.
    pub async fn open_modern_with(
        &self,
        id: Value,
        method: &str,
        params: Value,
        extra: &[(&str, &str)],
    ) -> http::Response<hyper::body::Incoming> {
        let (headers, body) = modern_request(id, method, params, None);
        let mut request = http::Request::builder()
            .method("POST")
            .uri(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        let request = request.body(Full::new(Bytes::from(body))).unwrap();
        tokio::time::timeout(DEADLINE, self.http.request(request))
            .await
            .expect("the stream opened in time")
            .unwrap()
    }
}

/// The `data:` payloads of SSE text read so far.
pub fn sse_data(seen: &str) -> Vec<Value> {
    seen.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// Processes whose parent is `pid`: the kernel's list of each of its threads' children (a
/// scan of `/proc/*/stat` can miss processes while others start and exit).
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}
