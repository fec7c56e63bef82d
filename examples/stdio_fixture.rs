//! A small stdio MCP server (handshake era) for the `serve` tests: tools that answer, stream
//! progress, ask the client a question, wait, crash, announce a change later, or start a
//! grandchild process. Each request runs on its own thread, so requests overlap.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[path = "fixture_parts/catalog.rs"]
mod catalog;
#[path = "fixture_parts/tasks.rs"]
mod tasks;

type Waiters = Arc<Mutex<HashMap<String, mpsc::Sender<Value>>>>;

/// Numbers the questions tasks ask, so several of one task's are told apart.
static TASK_QUESTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What the client said to the question `ask-later` asked after its call ended.
static HEARD_LATE: Mutex<String> = Mutex::new(String::new());

fn send(out: &Mutex<std::io::Stdout>, message: &Value) {
    let mut out = out.lock().unwrap();
    writeln!(out, "{message}").unwrap();
    out.flush().unwrap();
}

fn main() {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let waiters: Waiters = Arc::default();
    let counter = Arc::new(Mutex::new(0u64));
    eprintln!("fixture: started, pid {}", std::process::id());
    {
        let out = out.clone();
        tasks::set_notifier(Box::new(move |message| send(&out, &message)));
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if message.get("method").is_none() {
            // An answer to one of our questions.
            if let Some(id) = message["id"].as_str()
                && let Some(waiter) = waiters.lock().unwrap().remove(id)
            {
                let _ = waiter.send(message);
            }
            continue;
        }
        if message.get("id").is_none() {
            // Notifications; a cancellation is logged, so a test can see which server got it.
            if message["method"] == "notifications/cancelled" {
                eprintln!("fixture: cancelled {}", message["params"]["requestId"]);
            }
            continue;
        }
        // FIXTURE_ERA=silent: a server that never answers the era probe; silent-modern:
        // nor does it accept initialize (a 2026-07-28 server too slow for the probe).
        let era = std::env::var("FIXTURE_ERA").unwrap_or_default();
        if message["method"] == "server/discover" && era.starts_with("silent") {
            continue;
        }
        if message["method"] == "initialize" && era == "silent-modern" {
            send(
                &out,
                &json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32022,
                    "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}}),
            );
            continue;
        }
        // `deaf`: answer, then stop reading stdin (a server that hangs on its input).
        if message["params"]["name"] == "deaf" {
            send(
                &out,
                &json!({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}),
            );
            std::thread::sleep(std::time::Duration::from_secs(120));
        }
        let out = out.clone();
        let waiters = waiters.clone();
        let counter = counter.clone();
        std::thread::spawn(move || handle(&out, &waiters, &counter, message));
    }
}

fn handle(
    out: &Arc<Mutex<std::io::Stdout>>,
    waiters: &Waiters,
    counter: &Mutex<u64>,
    request: Value,
) {
    let id = request["id"].clone();
    let params = &request["params"];
    let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
    let method = request["method"].as_str().unwrap_or_default();
    if let Some(result) = catalog::answer(method, params) {
        send(out, &answer(result));
        return;
    }
    let ask = {
        let (out, waiters) = (out.clone(), waiters.clone());
        let asked = request["id"].to_string();
        Box::new(move |method: &str, params: Value| {
            let n = TASK_QUESTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let question_id = format!("task-question-{asked}-{n}");
            let (tx, rx) = mpsc::channel();
            waiters.lock().unwrap().insert(question_id.clone(), tx);
            send(
                &out,
                &json!({"jsonrpc": "2.0", "id": question_id, "method": method, "params": params}),
            );
            rx.recv_timeout(Duration::from_secs(60))
                .unwrap_or(Value::Null)
        })
    };
    if let Some(reply) = tasks::legacy(method, params, ask) {
        let reply = match reply {
            Ok(result) => answer(result),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        send(out, &reply);
        return;
    }
    if method == "tasks/get" && tasks::on() {
        let reply = match tasks::get(params) {
            Ok(result) => answer(result),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        send(out, &reply);
        return;
    }
    let result = match method {
        "initialize" => json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": tasks::legacy_capabilities(catalog::capabilities()),
            "serverInfo": {"name": "stdio-fixture", "version": "1"}
        }),
        "ping" => json!({}),
        // FIXTURE_ERA=modern: a 2026-07-28 server (it answers the era probe).
        "server/discover" if std::env::var("FIXTURE_ERA").as_deref() == Ok("modern") => json!({
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": tasks::modern_capabilities(),
            "serverInfo": {"name": "modern-fixture", "version": "1"}
        }),
        // FIXTURE_TOOLS_LIST=object: a broken server whose tools are an object, not a list.
        "tools/list" if std::env::var("FIXTURE_TOOLS_LIST").as_deref() == Ok("object") => {
            json!({"tools": {"echo": {"name": "echo", "inputSchema": {"type": "object"}}}})
        }
        "tools/list" => catalog::paged(
            json!([
                {"name": "echo", "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": true}},
                {"name": "slow", "inputSchema": {"type": "object"}},
                {"name": "progress", "inputSchema": {"type": "object"}},
                {"name": "ask", "inputSchema": {"type": "object"}},
                {"name": "roots", "inputSchema": {"type": "object"}},
                {"name": "ask-later", "inputSchema": {"type": "object"}},
                {"name": "heard", "inputSchema": {"type": "object"}},
                {"name": "announce", "inputSchema": {"type": "object"}},
                {"name": "announce-burst", "inputSchema": {"type": "object"}},
                {"name": "crash", "inputSchema": {"type": "object"},
                    "annotations": {"destructiveHint": true}},
                {"name": "grandchild", "inputSchema": {"type": "object"}},
                {"name": "whoami", "inputSchema": {"type": "object"},
                    "annotations": {"idempotentHint": true, "openWorldHint": false}},
                {"name": "noise", "inputSchema": {"type": "object"}},
                {"name": "meta", "inputSchema": {"type": "object"}},
                {"name": "region", "inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"}}}}
            ])
            .as_array()
            .into_iter()
            .flatten()
            .cloned()
            .chain(tasks::tools())
            .collect(),
            params,
        ),
        "tools/call" => {
            let arguments = &params["arguments"];
            match params["name"].as_str().unwrap_or_default() {
                "echo" => text(arguments["text"].as_str().unwrap_or_default().to_owned()),
                "slow" => {
                    std::thread::sleep(Duration::from_millis(
                        arguments["ms"].as_u64().unwrap_or(200),
                    ));
                    text("slept".into())
                }
                "progress" => {
                    let token = params["_meta"]["progressToken"].clone();
                    for step in 1..=3 {
                        send(
                            out,
                            &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step, "total": 3}}),
                        );
                    }
                    text("progressed".into())
                }
                "ask" => {
                    let n = {
                        let mut counter = counter.lock().unwrap();
                        *counter += 1;
                        *counter
                    };
                    let question_id = format!("q{n}");
                    let (tx, rx) = mpsc::channel();
                    waiters.lock().unwrap().insert(question_id.clone(), tx);
                    send(
                        out,
                        &json!({"jsonrpc": "2.0", "id": question_id, "method": "elicitation/create",
                        "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
                    );
                    let reply = rx
                        .recv_timeout(Duration::from_secs(30))
                        .unwrap_or(Value::Null);
                    text(format!(
                        "asked: {}",
                        reply["result"]["content"]["name"].as_str().unwrap_or("?")
                    ))
                }
                // Asks for the client's roots mid-call, as servers that sync roots do, and
                // answers with what it heard: the roots' count, or the refusal's code.
                "roots" => {
                    let n = {
                        let mut counter = counter.lock().unwrap();
                        *counter += 1;
                        *counter
                    };
                    let question_id = format!("r{n}");
                    let (tx, rx) = mpsc::channel();
                    waiters.lock().unwrap().insert(question_id.clone(), tx);
                    send(
                        out,
                        &json!({"jsonrpc": "2.0", "id": question_id, "method": "roots/list"}),
                    );
                    let reply = rx
                        .recv_timeout(Duration::from_secs(30))
                        .unwrap_or(Value::Null);
                    match reply["result"]["roots"].as_array() {
                        Some(roots) => text(format!("roots: {}", roots.len())),
                        None => text(format!("roots refused: {}", reply["error"]["code"])),
                    }
                }
                // Answers, then asks for roots while no call runs; `heard` tells the reply.
                "ask-later" => text("will ask".into()),
                "heard" => text(HEARD_LATE.lock().unwrap().clone()),
                // Answers, then announces a change that belongs to no request.
                "announce" => text("will announce".into()),
                "announce-burst" => text("will announce a hundred times at once".into()),
                "crash" => std::process::exit(3),
                // Left running on purpose: the gateway must end it with the process group.
                #[allow(clippy::zombie_processes)]
                "grandchild" => {
                    let child = std::process::Command::new("sleep")
                        .arg("300")
                        .spawn()
                        .unwrap();
                    text(child.id().to_string())
                }
                "whoami" => text(std::process::id().to_string()),
                // Unlisted: the trace context the call arrived with (`_meta.traceparent`).
                "trace" => text(
                    params["_meta"]["traceparent"]
                        .as_str()
                        .unwrap_or("none")
                        .to_owned(),
                ),
                // Unlisted: a tool whose call fails as a tool (`isError`).
                "fail" => {
                    json!({"content": [{"type": "text", "text": "it failed"}], "isError": true})
                }
                // Noise on the protocol stream before the answer: `lines` lines that are not
                // JSON-RPC, or one line of `bytes` bytes (a log dump, a binary blob).
                "noise" => {
                    let mut out = out.lock().unwrap();
                    if let Some(bytes) = arguments["bytes"].as_u64() {
                        let chunk = vec![b'x'; 1 << 20];
                        let mut left = bytes as usize;
                        while left > 0 {
                            let n = left.min(chunk.len());
                            out.write_all(&chunk[..n]).unwrap();
                            left -= n;
                        }
                        out.write_all(b"\n").unwrap();
                    }
                    for n in 0..arguments["lines"].as_u64().unwrap_or(0) {
                        writeln!(out, "DEBUG not json {n} {{oops").unwrap();
                    }
                    out.flush().unwrap();
                    text("after the noise".into())
                }
                // The envelope as the server received it.
                "meta" => text(
                    params["_meta"]["io.modelcontextprotocol/protocolVersion"]
                        .as_str()
                        .unwrap_or("none")
                        .to_owned(),
                ),
                "region" => text(arguments["region"].as_str().unwrap_or_default().to_owned()),
                _ => {
                    send(
                        out,
                        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool"}}),
                    );
                    return;
                }
            }
        }
        _ => {
            send(
                out,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            );
            return;
        }
    };
    send(out, &answer(result));
    // A hundred changes in one write: a reader that buffers fewer falls behind, however
    // fast it is scheduled (with three, a reader on another core sometimes kept up).
    if request["params"]["name"] == "announce-burst" {
        std::thread::sleep(Duration::from_millis(50));
        let change = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        let burst = format!("{change}\n").repeat(100);
        let mut out = out.lock().unwrap();
        out.write_all(burst.as_bytes()).unwrap();
        out.flush().unwrap();
    }
    if request["params"]["name"] == "ask-later" {
        std::thread::sleep(Duration::from_millis(50));
        let (tx, rx) = mpsc::channel();
        waiters.lock().unwrap().insert("late".into(), tx);
        send(
            out,
            &json!({"jsonrpc": "2.0", "id": "late", "method": "roots/list"}),
        );
        let reply = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or(Value::Null);
        *HEARD_LATE.lock().unwrap() = reply.to_string();
    }
    if request["params"]["name"] == "announce" {
        std::thread::sleep(Duration::from_millis(50));
        send(
            out,
            &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        );
    }
}
