//! Connections `serve` answers before it has read a request's body (a 401, a 413): the
//! client's next request on the same connection must still be answered, or the response
//! must say `Connection: close` (WORKAROUNDS.md 52). Raw TCP, so the body can be sent
//! apart from the headers as httpx sends it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::DEADLINE;
use crate::common::serve::*;

const TOKEN: &str = "s3cret-token";
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;

async fn serve_with_token(flags: &[&str]) -> Serve {
    Serve::start_with(
        flags,
        &[fixture().as_str()],
        &[("MCP_STDIO_SERVE_TOKEN", TOKEN)],
    )
    .await
}

fn post_head(port: u16, length: usize, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n{extra}\r\n"
    )
}

/// A new connection to `serve` with `bytes` written on it.
async fn connect_and_send(serve: &Serve, bytes: &str) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", serve.port)).await.unwrap();
    stream.write_all(bytes.as_bytes()).await.unwrap();
    stream
}

/// One response off the stream: its head (lower-cased) and its body, by Content-Length.
async fn read_response(stream: &mut TcpStream) -> (String, String) {
    tokio::time::timeout(DEADLINE, async {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if bytes.len() >= end + 4 + length {
                    let body = String::from_utf8_lossy(&bytes[end + 4..end + 4 + length]);
                    return (head, body.into_owned());
                }
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection closed mid-response: {bytes:?}");
            bytes.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("a response in time")
}

/// The server ends the connection (reads reach the end) within the deadline.
async fn assert_closed(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    tokio::time::timeout(DEADLINE, stream.read_to_end(&mut rest))
        .await
        .expect("the connection was closed")
        .unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

/// The refusal `status` with `Connection: close`, and then the end of the connection.
async fn assert_refused_and_closed(stream: &mut TcpStream, status: u16) {
    let (head, _) = read_response(stream).await;
    assert!(head.starts_with(&format!("http/1.1 {status}")), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_closed(stream).await;
}

#[tokio::test]
async fn a_401_answered_before_the_body_arrived_keeps_the_connection_for_the_next_request() {
    let serve = serve_with_token(&[]).await;
    let mut stream = connect_and_send(&serve, &post_head(serve.port, BODY.len(), "")).await;
    // The body comes late, as it does when a client writes its headers and its body apart
    // on a busy machine: serve has seen the headers alone and knows the answer is a 401.
    tokio::time::sleep(Duration::from_millis(150)).await;
    stream.write_all(BODY.as_bytes()).await.unwrap();
    let (head, body) = read_response(&mut stream).await;
    assert!(head.starts_with("http/1.1 401"), "{head}\n{body}");
    assert!(!head.contains("connection: close"), "{head}");

    // The same connection carries the retry with the token.
    let authorized = format!("Authorization: Bearer {TOKEN}\r\n");
    let initialize = initialize_body();
    stream
        .write_all(post_head(serve.port, initialize.len(), &authorized).as_bytes())
        .await
        .unwrap();
    stream.write_all(initialize.as_bytes()).await.unwrap();
    let (head, body) = read_response(&mut stream).await;
    assert!(head.starts_with("http/1.1 200"), "{head}\n{body}");
    assert!(body.contains("serverInfo"), "{body}");
    assert!(!head.contains("connection: close"), "{head}");
}

#[tokio::test]
async fn a_refused_body_larger_than_max_drain_size_closes_the_connection_and_says_so() {
    let serve = serve_with_token(&["--max-drain-size", "16"]).await;
    let mut stream = connect_and_send(&serve, &post_head(serve.port, BODY.len(), "")).await;
    assert_refused_and_closed(&mut stream, 401).await;
    // A body within the bound on another connection keeps it open (the bound, not the
    // refusal, closed the first).
    let mut small =
        connect_and_send(&serve, &format!("{}{{}}", post_head(serve.port, 2, ""))).await;
    let (head, _) = read_response(&mut small).await;
    assert!(
        head.starts_with("http/1.1 401") && !head.contains("connection: close"),
        "{head}"
    );
}

#[tokio::test]
async fn a_refused_body_that_never_comes_closes_the_connection_after_timeout_drain() {
    let serve = serve_with_token(&["--timeout-drain", "0.2"]).await;
    let mut stream = connect_and_send(&serve, &post_head(serve.port, BODY.len(), "")).await;
    // The client holds its body back; the 401 still comes, and closes the connection.
    assert_refused_and_closed(&mut stream, 401).await;
}

#[tokio::test]
async fn a_client_that_expects_100_continue_gets_its_refusal_at_once_and_no_continue() {
    let serve = serve_with_token(&[]).await;
    let mut stream = connect_and_send(
        &serve,
        &post_head(serve.port, 1 << 20, "Expect: 100-continue\r\n"),
    )
    .await;
    assert_refused_and_closed(&mut stream, 401).await;
}

#[tokio::test]
async fn a_413_for_a_declared_oversize_body_closes_the_connection() {
    let serve = Serve::start(&["--max-message-size", "1024"]).await;
    let mut stream = connect_and_send(&serve, &post_head(serve.port, 4096, "")).await;
    stream.write_all(&[b' '; 512]).await.unwrap();
    assert_refused_and_closed(&mut stream, 413).await;
}
