//! Test harness: a scriptable fake MCP upstream (axum on 127.0.0.1:0), the relay's command
//! line on the one stdio driver (`stdio`), and the fakes of the other modes beside it
//! (`serve`, `sse_server`, `modern`). Every wait has a deadline; nothing sleeps blind.

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Response, Uri};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub mod collector;
pub mod issuer;
pub mod modern;
pub mod proxy;
pub mod sandbox;
pub mod serve;
pub mod signin;
pub mod sse_server;
pub mod stdio;

/// Waits until `check` gives a value, asking again every few milliseconds; past
/// `DEADLINE` the test fails with `what` and what `check` last said. The one polling loop
/// of the suite: every wait on a condition goes through it.
pub async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match check().await {
            Ok(found) => return found,
            Err(last) => assert!(
                Instant::now() < deadline,
                "not within {DEADLINE:?}: {what}; last: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (with the deadline) until the text `log` returns contains `needle`.
pub async fn wait_logged(log: impl Fn() -> String, needle: &str) {
    eventually(&format!("logged {needle:?}"), async || {
        let text = log();
        if text.contains(needle) {
            Ok(())
        } else {
            Err(format!("stderr:\n{text}"))
        }
    })
    .await
}

/// Waits (with the deadline) until `needles` occur in the text `log` returns at least `n`
/// times between them.
pub async fn wait_logged_count(log: impl Fn() -> String, needles: &[&str], n: usize) {
    eventually(&format!("logged {needles:?} {n} times"), async || {
        let text = log();
        let seen: usize = needles
            .iter()
            .map(|needle| text.matches(needle).count())
            .sum();
        if seen >= n {
            Ok(())
        } else {
            Err(format!("{seen} times; stderr:\n{text}"))
        }
    })
    .await
}

pub const DEADLINE: Duration = Duration::from_secs(15);

/// One request the fake upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: String,
    pub at: Instant,
}

impl Seen {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    pub fn rpc_method(&self) -> Option<String> {
        self.json()
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

/// One step of a scripted SSE body.
#[derive(Clone)]
pub enum Step {
    /// `id:`, `retry:` (ms) and `data:` lines; empty fields are left out.
    Event {
        id: Option<String>,
        retry: Option<u64>,
        data: Option<String>,
    },
    /// Raw bytes written as they are.
    Raw(String),
    /// Pause the stream until the test says go.
    Wait(Arc<Notify>),
    /// Never end (until the client goes away).
    Hang,
    /// Break the connection (the body errors).
    Abort,
}

pub fn data(value: Value) -> Step {
    Step::Event {
        id: None,
        retry: None,
        data: Some(value.to_string()),
    }
}

pub fn event(id: &str, value: Value) -> Step {
    Step::Event {
        id: Some(id.into()),
        retry: None,
        data: Some(value.to_string()),
    }
}

pub fn priming(id: &str, retry_ms: Option<u64>) -> Step {
    Step::Event {
        id: Some(id.into()),
        retry: retry_ms,
        data: Some(String::new()),
    }
}

/// What the fake answers.
pub enum Reply {
    Json {
        status: u16,
        body: String,
        headers: Vec<(&'static str, String)>,
    },
    Sse {
        headers: Vec<(&'static str, String)>,
        steps: Vec<Step>,
    },
    Status(u16),
    /// Drop the connection without answering.
    Abort,
    /// Wait, then answer.
    Delayed(Arc<Notify>, Box<Reply>),
    /// An SSE body written as the test feeds it raw event text; it ends when the sender is
    /// dropped.
    Feed(tokio::sync::mpsc::UnboundedReceiver<String>),
}

/// One SSE event's text: `id:` when given, then the message as `data:`.
pub fn sse_text(id: Option<&str>, message: &Value) -> String {
    match id {
        Some(id) => format!("id: {id}\ndata: {message}\n\n"),
        None => format!("data: {message}\n\n"),
    }
}

pub fn json_reply(body: Value) -> Reply {
    Reply::Json {
        status: 200,
        body: body.to_string(),
        headers: vec![],
    }
}

pub fn result_for(request: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"].clone(), "result": result})
}

pub type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A fake Streamable HTTP server that records every request and answers per `handler`.
pub struct Upstream {
    pub url: String,
    pub addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Requests whose response body the client dropped before it ended.
    dropped: Arc<AtomicUsize>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct DropSignal(Arc<AtomicUsize>, Arc<Notify>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_waiters();
    }
}

impl Upstream {
    pub async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let handler: Handler = Arc::new(handler);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let dropped = Arc::new(AtomicUsize::new(0));
        let changed = Arc::new(Notify::new());
        let state = (handler, seen.clone(), dropped.clone(), changed.clone());
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (handler, seen, dropped, changed) = state.clone();
                async move {
                    let request = Seen {
                        method,
                        uri,
                        headers,
                        body: String::from_utf8_lossy(&body).into_owned(),
                        at: Instant::now(),
                    };
                    seen.lock().unwrap().push(request.clone());
                    changed.notify_waiters();
                    let reply = handler(&request);
                    respond(reply, dropped, changed).await
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Upstream {
            url: format!("http://{addr}/mcp"),
            addr,
            seen,
            dropped,
            changed,
            task,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Requests with this JSON-RPC method.
    pub fn posts_of(&self, rpc_method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.rpc_method().as_deref() == Some(rpc_method))
            .collect()
    }

    pub fn dropped_streams(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Waits until `check` holds over the recorded requests.
    pub async fn wait_until(&self, what: &str, check: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let notified = self.changed.notified();
            let seen = self.seen();
            if check(&seen) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for the upstream to see: {what}; saw {:#?}",
                seen.iter()
                    .map(|s| (&s.method, s.body.clone()))
                    .collect::<Vec<_>>()
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
        }
    }

    /// Waits until a request with this JSON-RPC method has arrived; returns all seen so far.
    pub async fn wait_for_method(&self, rpc_method: &str) -> Vec<Seen> {
        self.wait_until(rpc_method, |seen| {
            seen.iter()
                .any(|s| s.rpc_method().as_deref() == Some(rpc_method))
        })
        .await
    }

    pub async fn wait_dropped(&self, n: usize) {
        let deadline = Instant::now() + DEADLINE;
        while self.dropped_streams() < n {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {n} dropped streams"
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), self.changed.notified()).await;
        }
    }
}

fn respond(
    reply: Reply,
    dropped: Arc<AtomicUsize>,
    changed: Arc<Notify>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>> {
    Box::pin(async move {
        match reply {
            Reply::Json {
                status,
                body,
                headers,
            } => {
                let mut response = Response::builder().status(status);
                if !headers.iter().any(|(name, _)| *name == "content-type") {
                    response = response.header("content-type", "application/json");
                }
                for (name, value) in headers {
                    response = response.header(name, value);
                }
                response.body(Body::from(body)).unwrap()
            }
            Reply::Status(status) => Response::builder()
                .status(status)
                .body(Body::empty())
                .unwrap(),
            Reply::Delayed(go, reply) => {
                go.notified().await;
                respond(*reply, dropped, changed).await
            }
            Reply::Feed(events) => {
                let stream = futures_util::stream::unfold(events, |mut events| async move {
                    let text = events.recv().await?;
                    Some((Ok::<Bytes, std::io::Error>(Bytes::from(text)), events))
                });
                Response::builder()
                    .status(200)
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
            Reply::Abort => {
                let stream = futures_util::stream::once(async {
                    Err::<Bytes, std::io::Error>(std::io::Error::other("abort"))
                });
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
            Reply::Sse { headers, steps } => {
                let mut response = Response::builder()
                    .status(200)
                    .header("content-type", "text/event-stream");
                for (name, value) in headers {
                    response = response.header(name, value);
                }
                let guard = DropSignal(dropped, changed);
                let stream = futures_util::stream::unfold(
                    (steps.into_iter(), guard),
                    |(mut steps, guard)| async move {
                        let step = match steps.next() {
                            Some(step) => step,
                            None => {
                                std::mem::forget(guard); // ended normally: not a drop by the client
                                return None;
                            }
                        };
                        let chunk: Result<Bytes, std::io::Error> = match step {
                            Step::Event { id, retry, data } => {
                                let mut text = String::new();
                                if let Some(id) = id {
                                    text.push_str(&format!("id: {id}\n"));
                                }
                                if let Some(retry) = retry {
                                    text.push_str(&format!("retry: {retry}\n"));
                                }
                                if let Some(data) = data {
                                    text.push_str(&format!("data: {data}\n"));
                                }
                                text.push('\n');
                                Ok(Bytes::from(text))
                            }
                            Step::Raw(text) => Ok(Bytes::from(text)),
                            Step::Wait(go) => {
                                go.notified().await;
                                Ok(Bytes::new())
                            }
                            Step::Hang => {
                                std::future::pending::<()>().await;
                                unreachable!()
                            }
                            Step::Abort => Err(std::io::Error::other("abort")),
                        };
                        Some((chunk, (steps, guard)))
                    },
                );
                response.body(Body::from_stream(stream)).unwrap()
            }
        }
    })
}

/// A plain, well-behaved upstream: answers initialize with a session, 202 for notifications
/// and responses, 405 for GET, 200 for DELETE, and `{}`-ish results for the rest.
pub fn basic(seen: &Seen) -> Reply {
    standard(seen).unwrap_or_else(|| {
        let request = seen.json();
        json_reply(result_for(&request, json!({"echo": request["method"]})))
    })
}

/// The parts every test server shares; `None` for a request the test should answer.
pub fn standard(seen: &Seen) -> Option<Reply> {
    match seen.method {
        Method::GET => return Some(Reply::Status(405)),
        Method::DELETE => return Some(Reply::Status(200)),
        _ => {}
    }
    let request = seen.json();
    if request.get("id").is_none() || request.get("method").is_none() {
        return Some(Reply::Status(202));
    }
    match request["method"].as_str() {
        Some("initialize") => Some(Reply::Json {
            status: 200,
            body: result_for(&request, json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})).to_string(),
            headers: vec![("mcp-session-id", "session-1".into())],
        }),
        Some("ping") => Some(json_reply(result_for(&request, json!({})))),
        // The relay's era probe, refused the way a stateful legacy server refuses any
        // request without a session (the TypeScript and Python SDKs' answer).
        Some("server/discover") => Some(Reply::Json {
            status: 400,
            body: json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}}).to_string(),
            headers: vec![],
        }),
        _ => None,
    }
}

/// The relay's command line: `url`, `args` (debug logging unless they set a level), and an
/// environment without proxies or tokens. Standard streams are left for the caller to set.
pub fn relay_command(url: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary());
    command.arg(url).args(args);
    if !args.contains(&"--log-level") {
        command.args(["--log-level", "debug"]);
    }
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "MCP_BEARER_TOKEN",
    ] {
        command.env_remove(name);
    }
    // A token store of its own, empty: never the developer's real logins.
    static STATE: AtomicUsize = AtomicUsize::new(0);
    let state = std::env::temp_dir().join(format!(
        "mcp-stdio-test-state-{}-{}",
        std::process::id(),
        STATE.fetch_add(1, Ordering::Relaxed)
    ));
    command.env("XDG_STATE_HOME", state);
    // No session bus: the OS keyring is never touched (the file store is used instead).
    command.env(
        "DBUS_SESSION_BUS_ADDRESS",
        "unix:path=/nonexistent/mcp-stdio-test-bus",
    );
    command.kill_on_drop(true);
    command
}

/// The relay binary on a stdio driver: `Relay::start(url, args)`.
pub type Relay = stdio::StdioPeer;

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_mcp-stdio")
}

impl stdio::StdioPeer {
    pub async fn start(url: &str, args: &[&str]) -> Self {
        Self::start_with_env(url, args, &[]).await
    }

    /// Starts the relay with a clean proxy environment plus `env`.
    pub async fn start_with_env(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = relay_command(url, args);
        for (name, value) in env {
            command.env(name, value);
        }
        Self::spawn(command)
    }

    /// The host's side of the handshake.
    pub async fn initialize(&mut self) -> Value {
        let answer = self
            .call(json!(0), "initialize", host_initialize_params())
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        answer
    }
}

pub fn host_initialize_params() -> Value {
    json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "test-host", "version": "9.9.9"}
    })
}

/// Runs the binary to completion with `args`, no stdin; returns (code, stdout, stderr).
pub fn run_to_end(args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .env_remove("MCP_BEARER_TOKEN")
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("mcp-stdio-test-state-none"),
        )
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/mcp-stdio-test-bus",
        )
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
