//! A fake 2024-11-05 HTTP+SSE server (axum on 127.0.0.1:0): `GET /sse` opens the stream,
//! whose first event names the endpoint; `POST /messages` answers 202 and the answer goes
//! out on the stream. The test drops streams, refuses reconnections and changes the
//! endpoint; every wait has a deadline.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Response, StatusCode};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use super::DEADLINE;

#[derive(Default)]
struct State {
    /// What the `endpoint` event says; `{base}` is replaced by the server's base URL.
    endpoint: Mutex<String>,
    /// The current stream's sender (`None`: no stream).
    stream: Mutex<Option<mpsc::UnboundedSender<Option<String>>>>,
    gets: AtomicUsize,
    refuse_gets: AtomicUsize,
    /// Status for `POST /sse` (what an HTTP+SSE server says to a Streamable HTTP POST).
    post_to_sse: Mutex<u16>,
    posts: Mutex<Vec<(HeaderMap, Value)>>,
    changed: Notify,
    base: Mutex<String>,
}

pub struct SseServer {
    /// The SSE URL: what the relay is given.
    pub url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SseServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SseServer {
    /// A server whose `endpoint` event is `endpoint` (`{base}` stands for its base URL).
    pub async fn start(endpoint: &str) -> Self {
        let state = Arc::new(State::default());
        *state.endpoint.lock().unwrap() = endpoint.to_owned();
        *state.post_to_sse.lock().unwrap() = 405;
        let for_get = state.clone();
        let for_post = state.clone();
        let for_sse_post = state.clone();
        let app = axum::Router::new()
            .route(
                "/sse",
                get(move || open_stream(for_get.clone())).post(move || {
                    let status = *for_sse_post.post_to_sse.lock().unwrap();
                    async move { StatusCode::from_u16(status).unwrap() }
                }),
            )
            .route(
                "/messages",
                post(move |headers: HeaderMap, body: Bytes| {
                    on_post_or_refuse(for_post.clone(), headers, body)
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        let base = format!("http://{addr}");
        *state.base.lock().unwrap() = base.clone();
        SseServer {
            url: format!("{base}/sse"),
            state,
            task,
        }
    }

    pub fn gets(&self) -> usize {
        self.state.gets.load(Ordering::SeqCst)
    }

    /// The JSON bodies POSTed to the endpoint so far.
    pub fn posts(&self) -> Vec<Value> {
        self.state
            .posts
            .lock()
            .unwrap()
            .iter()
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn set_post_to_sse(&self, status: u16) {
        *self.state.post_to_sse.lock().unwrap() = status;
    }

    /// The next `n` GETs get 503.
    pub fn refuse_next_gets(&self, n: usize) {
        self.state.refuse_gets.store(n, Ordering::SeqCst);
    }

    /// Ends the current stream (the session goes with it).
    pub fn drop_stream(&self) {
        if let Some(stream) = self.state.stream.lock().unwrap().take() {
            let _ = stream.send(None);
        }
    }

    /// Waits until `check` holds over the POSTed bodies.
    pub async fn wait_posts(&self, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let notified = self.state.changed.notified();
            let posts = self.posts();
            if check(&posts) {
                return posts;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for: {what}; posts: {posts:#?}"
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
        }
    }

    /// Waits until at least `n` GETs have arrived.
    pub async fn wait_gets(&self, n: usize) {
        let deadline = Instant::now() + DEADLINE;
        while self.gets() < n {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {n} GETs (saw {})",
                self.gets()
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), self.state.changed.notified())
                .await;
        }
    }
}

fn send(state: &State, message: &Value) {
    if let Some(stream) = state.stream.lock().unwrap().as_ref() {
        let _ = stream.send(Some(message.to_string()));
    }
}

async fn open_stream(state: Arc<State>) -> Response<Body> {
    state.gets.fetch_add(1, Ordering::SeqCst);
    state.changed.notify_waiters();
    if state
        .refuse_gets
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Response::builder().status(503).body(Body::empty()).unwrap();
    }
    let (tx, rx) = mpsc::unbounded_channel::<Option<String>>();
    let endpoint = state
        .endpoint
        .lock()
        .unwrap()
        .replace("{base}", &state.base.lock().unwrap());
    *state.stream.lock().unwrap() = Some(tx);
    let first = format!("event: endpoint\ndata: {endpoint}\n\n");
    // The endpoint first, then each message, until the test drops the stream.
    let stream = futures_util::stream::unfold((Some(first), rx), |(first, mut rx)| async move {
        let chunk = match first {
            Some(first) => first,
            None => match rx.recv().await {
                Some(Some(message)) => format!("event: message\ndata: {message}\n\n"),
                _ => return None,
            },
        };
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), (None, rx)))
    });
    let body = Body::from_stream(stream);
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap()
}

/// `tools/call null_error` is refused in the POST's own body, 400 with a JSON-RPC error
/// whose id is null (as some servers answer a request they could not read); everything
/// else goes to `on_post`.
async fn on_post_or_refuse(state: Arc<State>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    let refused = serde_json::from_slice::<Value>(&body)
        .is_ok_and(|m| m["method"] == "tools/call" && m["params"]["name"] == "null_error");
    if refused {
        let message = serde_json::from_slice::<Value>(&body).unwrap();
        state.posts.lock().unwrap().push((headers, message));
        state.changed.notify_waiters();
        let error = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32602, "message": "Invalid params: refused"}});
        return Response::builder()
            .status(400)
            .header("content-type", "application/json")
            .body(Body::from(error.to_string()))
            .unwrap();
    }
    let status = on_post(state, headers, body).await;
    Response::builder()
        .status(status)
        .body(Body::empty())
        .unwrap()
}

/// Records the POST, answers 202, and answers the request on the stream as the tools say:
/// `echo` echoes, `slow` waits `ms` first, `hold` never answers, `flood` sends `count`
/// notifications of `size` bytes first.
async fn on_post(state: Arc<State>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    state.posts.lock().unwrap().push((headers, message.clone()));
    state.changed.notify_waiters();
    if message.get("id").is_none() || message.get("method").is_none() {
        return StatusCode::ACCEPTED;
    }
    let id = message["id"].clone();
    let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    let params = &message["params"];
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake-sse", "version": "1"}}),
        "ping" => json!({}),
        "tools/call" => {
            let arguments = &params["arguments"];
            match params["name"].as_str().unwrap_or_default() {
                "echo" => {
                    json!({"content": [{"type": "text", "text": arguments["text"].clone()}]})
                }
                "slow" => {
                    let ms = arguments["ms"].as_u64().unwrap_or(200);
                    let state = state.clone();
                    let line = answer(json!({"content": [{"type": "text", "text": "slept"}]}));
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        send(&state, &line);
                    });
                    return StatusCode::ACCEPTED;
                }
                "hold" => return StatusCode::ACCEPTED,
                "flood" => {
                    let size = arguments["size"].as_u64().unwrap_or(1024) as usize;
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": "x".repeat(size)}});
                    for _ in 0..arguments["count"].as_u64().unwrap_or(1) {
                        send(&state, &note);
                    }
                    json!({"content": [{"type": "text", "text": "flooded"}]})
                }
                _ => json!({"content": [], "isError": true}),
            }
        }
        _ => {
            send(
                &state,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            );
            return StatusCode::ACCEPTED;
        }
    };
    send(&state, &answer(result));
    StatusCode::ACCEPTED
}
