//! The HTTP side: retries and what is never replayed, Retry-After, proxies, redirects,
//! bounds on size and in-flight requests, timeouts and auth errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn a_tool_call_that_may_have_executed_is_never_replayed_but_a_list_is() {
    let lists = Arc::new(AtomicUsize::new(0));
    let counter = lists.clone();
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            match request["method"].as_str().unwrap() {
                "tools/call" => Reply::Abort,
                _ if counter.fetch_add(1, Ordering::SeqCst) == 0 => Reply::Abort,
                _ => json_reply(result_for(&request, json!({"tools": []}))),
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let call = relay
        .call(json!(1), "tools/call", json!({"name": "rm"}))
        .await;
    let message = call["error"]["message"].as_str().unwrap();
    assert!(message.contains("may have executed"), "{message}");
    assert_eq!(upstream.posts_of("tools/call").len(), 1);

    let list = relay.call(json!(2), "tools/list", json!({})).await;
    assert_eq!(list["result"]["tools"], json!([]));
    assert_eq!(upstream.posts_of("tools/list").len(), 2);
}

#[tokio::test]
async fn retry_after_is_honoured_on_429_and_503() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            match counter.fetch_add(1, Ordering::SeqCst) {
                0 => Reply::Json {
                    status: 429,
                    body: String::new(),
                    headers: vec![("retry-after", "1".into())],
                },
                1 => Reply::Json {
                    status: 503,
                    body: String::new(),
                    headers: vec![("retry-after", "0".into())],
                },
                _ => json_reply(result_for(&request, json!({"ok": true}))),
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let answer = relay
        .call(json!(1), "tools/call", json!({"name": "x"}))
        .await;
    assert_eq!(answer["result"]["ok"], true, "{answer}");
    let calls = upstream.posts_of("tools/call");
    assert_eq!(calls.len(), 3);
    assert!(calls[1].at.duration_since(calls[0].at) >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_is_reported_not_waited_for() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Json {
            status: 429,
            body: String::new(),
            headers: vec![("retry-after", "120".into())],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--retry-after-max", "5"]).await;
    relay.initialize().await;
    let answer = relay.call(json!(1), "tools/list", json!({})).await;
    assert_eq!(
        answer["error"]["data"],
        json!({"httpStatus": 429, "retryAfter": 120})
    );
    assert_eq!(upstream.posts_of("tools/list").len(), 1);
}

#[tokio::test]
async fn proxy_variables_apply_to_relay_traffic() {
    // The fake plays the proxy: a proxied plain-HTTP request arrives in absolute form.
    let proxy = Upstream::start(basic).await;
    let proxy_url = format!("http://{}", proxy.addr);
    let mut relay = Relay::start_with_env(
        "http://mcp.example.invalid/mcp",
        &[],
        &[("HTTP_PROXY", &proxy_url)],
    )
    .await;
    relay.initialize().await;
    let seen = proxy.posts_of("initialize");
    assert_eq!(seen[0].uri.to_string(), "http://mcp.example.invalid/mcp");
    assert_eq!(
        seen[0].header("host").as_deref(),
        Some("mcp.example.invalid")
    );
}

#[tokio::test]
async fn proxy_credentials_go_in_proxy_authorization_and_nowhere_else() {
    let proxy = Upstream::start(basic).await;
    let proxy_url = format!("http://proxyuser:proxy-secret-1@{}", proxy.addr);
    let mut relay = Relay::start_with_env(
        "http://mcp.example.invalid/mcp",
        &["--log-level", "trace"],
        &[("HTTP_PROXY", &proxy_url)],
    )
    .await;
    relay.initialize().await;
    relay.call(json!(1), "tools/list", json!({})).await;
    for seen in proxy
        .posts_of("tools/list")
        .iter()
        .chain(&proxy.posts_of("initialize"))
    {
        assert_eq!(
            seen.header("proxy-authorization").as_deref(),
            Some("Basic cHJveHl1c2VyOnByb3h5LXNlY3JldC0x")
        );
    }
    relay.close_stdin();
    relay.wait_exit().await;
    relay.wait_stderr("host protocol era").await;
    assert!(
        !relay.stderr().contains("proxy-secret-1"),
        "{}",
        relay.stderr()
    );
}

#[tokio::test]
async fn an_https_upstream_is_tunnelled_through_the_proxy_with_connect() {
    // A raw proxy that records the tunnel request and refuses it.
    let proxy = crate::common::proxy::RefusingProxy::start().await;
    let proxy_addr = proxy.addr;
    let proxy_url = format!("http://tunneluser:tunnel-secret@{proxy_addr}");
    let mut relay = Relay::start_with_env(
        "https://mcp.example.invalid/mcp",
        &["--max-retries", "0"],
        &[("HTTPS_PROXY", &proxy_url)],
    )
    .await;
    relay
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": host_initialize_params()}))
        .await;
    let answer = relay.recv().await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let head = tokio::time::timeout(DEADLINE, proxy.head)
        .await
        .unwrap()
        .unwrap();
    assert!(
        head.starts_with("CONNECT mcp.example.invalid:443 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("proxy-authorization: basic dhvubmvsdxnlcjp0dw5uzwwtc2vjcmv0"),
        "{head}"
    );
    relay.wait_stderr("host protocol era").await;
    assert!(!relay.stderr().contains("tunnel-secret"));
}

#[test]
fn an_unsupported_proxy_scheme_is_refused_at_startup() {
    let output = std::process::Command::new(binary())
        .arg("https://mcp.example.invalid/mcp")
        .env("HTTPS_PROXY", "socks5://user:socks-secret@127.0.0.1:1080")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("socks5:// proxy, which is not supported"),
        "{stderr}"
    );
    assert!(stderr.contains("give an http:// proxy URL"), "{stderr}");
    assert!(!stderr.contains("socks-secret"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[tokio::test]
async fn no_proxy_is_honoured() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start_with_env(
        &upstream.url,
        &[],
        &[
            ("HTTP_PROXY", "http://127.0.0.1:9"),
            ("NO_PROXY", "127.0.0.1"),
        ],
    )
    .await;
    relay.initialize().await;
    assert_eq!(upstream.posts_of("initialize").len(), 1);
}

#[tokio::test]
async fn same_origin_307_and_308_are_followed_others_are_not() {
    let upstream = Upstream::start(|seen| {
        let path = seen.uri.path().to_owned();
        match path.as_str() {
            "/mcp" if seen.json()["method"] == "tools/list" => Reply::Json {
                status: 307,
                body: String::new(),
                headers: vec![("location", "/moved".into())],
            },
            "/mcp" if seen.json()["method"] == "prompts/list" => Reply::Json {
                status: 302,
                body: String::new(),
                headers: vec![("location", "/moved".into())],
            },
            _ => basic(seen),
        }
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let followed = relay.call(json!(1), "tools/list", json!({})).await;
    assert_eq!(followed["result"]["echo"], "tools/list");
    assert!(
        upstream
            .seen()
            .iter()
            .any(|s| s.uri.path() == "/moved" && s.json()["method"] == "tools/list"),
        "the POST body went along"
    );
    let refused = relay.call(json!(2), "prompts/list", json!({})).await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("307/308"),
        "{refused}"
    );
}

#[tokio::test]
async fn an_answer_over_the_size_limit_becomes_an_error_for_that_request_only() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            let size = if request["method"] == "big" { 8000 } else { 10 };
            let reply = result_for(&request, json!({"blob": "x".repeat(size)}));
            if request["method"] == "big" && request["params"]["sse"] == true {
                Reply::Sse {
                    headers: vec![],
                    steps: vec![data(reply)],
                }
            } else {
                json_reply(reply)
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--max-message-size", "4096"]).await;
    relay.initialize().await;
    let json_answer = relay.call(json!(1), "big", json!({})).await;
    assert!(
        json_answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-message-size (4096 bytes)")
    );
    let sse_answer = relay.call(json!(2), "big", json!({"sse": true})).await;
    assert!(
        sse_answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-message-size (4096 bytes)")
    );
    let small = relay.call(json!(3), "small", json!({})).await;
    assert!(small.get("result").is_some());
}

#[tokio::test]
async fn many_small_events_on_one_stream_never_add_up_to_the_limit() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            let mut steps: Vec<Step> = (0..60)
                .map(|i| data(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":format!("{i}:{}", "y".repeat(200))}})))
                .collect();
            steps.push(data(result_for(&request, json!({"done": true}))));
            Reply::Sse { headers: vec![], steps }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--max-message-size", "4096"]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chatty"}}))
        .await;
    for _ in 0..60 {
        assert_eq!(relay.recv().await["method"], "notifications/message");
    }
    assert_eq!(relay.recv().await["result"]["done"], true);
}

#[tokio::test]
async fn requests_beyond_max_in_flight_are_refused_with_a_reason() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Sse {
            headers: vec![],
            steps: vec![Step::Hang],
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--max-in-flight", "1"]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}))
        .await;
    let refused = relay
        .call(json!(2), "tools/call", json!({"name": "second"}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-in-flight (1)"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_silent_upstream_times_out_with_a_clear_error() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or(Reply::Delayed(
            Arc::new(tokio::sync::Notify::new()),
            Box::new(Reply::Status(200)),
        ))
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--timeout-read", "0.5"]).await;
    relay.initialize().await;
    let answer = relay
        .call(json!(1), "tools/call", json!({"name": "x"}))
        .await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no response within") && message.contains("may have executed"),
        "{message}"
    );
    assert_eq!(upstream.posts_of("tools/call").len(), 1);
}

#[tokio::test]
async fn unauthorized_tells_the_host_what_would_work() {
    let upstream = Upstream::start(|_| Reply::Status(401)).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    let answer = relay
        .call(json!(0), "initialize", host_initialize_params())
        .await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("401") && message.contains("--bearer-token"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_retried_then_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let mut relay = Relay::start(&url, &["--max-retries", "1"]).await;
    let answer = relay
        .call(json!(0), "initialize", host_initialize_params())
        .await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot connect") && message.contains("2 attempt"),
        "{message}"
    );
}

#[tokio::test]
async fn a_connect_that_hangs_is_cut_off_by_timeout_connect() {
    // A listener whose accept queue is full and never drained: the kernel drops further
    // SYNs, so a new connection neither succeeds nor is refused. It just hangs.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        let attempt = tokio::net::TcpStream::connect(addr);
        match tokio::time::timeout(std::time::Duration::from_millis(200), attempt).await {
            Ok(Ok(stream)) => fillers.push(stream),
            _ => break, // the queue is full: connects now hang
        }
    }
    let mut relay = Relay::start(
        &format!("http://{addr}/mcp"),
        &["--timeout-connect", "0.3", "--max-retries", "0"],
    )
    .await;
    relay
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": host_initialize_params()}))
        .await;
    let answer = relay.recv().await;
    let message = answer["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("no connection within 0.3 s (--timeout-connect)"),
        "{message}"
    );
    drop((listener, fillers));
}
