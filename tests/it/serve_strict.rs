//! The strict request checks of serve's MCP endpoint: a POST is `application/json` (UTF-8)
//! and accepts both answers a server may give, or it is refused before anything runs.

use serde_json::Value;

use crate::common::modern::enveloped;
use crate::common::serve::{Serve, initialize_body};

const BOTH: &str = "application/json, text/event-stream";

fn refused(answer: &crate::common::serve::Answer, status: u16, says: &str, case: &str) {
    assert_eq!(answer.status, status, "{case}: {}", answer.body);
    assert!(
        answer.headers.get("mcp-session-id").is_none(),
        "{case}: no session"
    );
    let body: Value = serde_json::from_str(&answer.body).expect("a JSON-RPC error body");
    assert_eq!(body["error"]["code"], -32000, "{case}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(says), "{case}: {message}");
}

#[tokio::test]
async fn a_post_must_be_json_and_accept_both_answers() {
    let serve = Serve::start(&[]).await;
    // The channel works: a well-formed initialize opens a session.
    let fine = serve
        .send_exactly(
            "POST",
            "/mcp",
            &[("content-type", "application/json"), ("accept", BOTH)],
            &initialize_body(),
        )
        .await;
    assert_eq!(fine.status, 200, "{}", fine.body);
    assert_eq!(serve.gauge("mcp_stdio_sessions").await, 1);

    for content_type in [
        None,
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=b"),
        Some("application/json; charset=iso-8859-1"),
        Some("application/jsonx"),
    ] {
        let mut headers = vec![("accept", BOTH)];
        headers.extend(content_type.map(|c| ("content-type", c)));
        let answer = serve
            .send_exactly("POST", "/mcp", &headers, &initialize_body())
            .await;
        refused(
            &answer,
            415,
            "Content-Type: application/json",
            &format!("{content_type:?}"),
        );
        assert!(answer.body.contains("Unsupported Media Type"));
    }
    for accept in [
        None,
        Some("text/html"),
        Some("application/json"),
        Some("text/event-stream"),
        Some("application/json, text/event-stream;q=0"),
    ] {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(accept.map(|a| ("accept", a)));
        let answer = serve
            .send_exactly("POST", "/mcp", &headers, &initialize_body())
            .await;
        refused(
            &answer,
            406,
            "Accept: application/json, text/event-stream",
            &format!("{accept:?}"),
        );
    }
    // A 2026-07-28 request gets the same checks.
    let modern = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": enveloped(serde_json::json!({}))});
    let answer = serve
        .send_exactly(
            "POST",
            "/mcp",
            &[("content-type", "text/plain"), ("accept", BOTH)],
            &modern.to_string(),
        )
        .await;
    refused(&answer, 415, "Content-Type", "2026-07-28, text/plain");
    assert_eq!(
        serve.gauge("mcp_stdio_sessions").await,
        1,
        "no refused request opened a session"
    );

    // What HTTP allows is served: a UTF-8 charset, wildcards that cover both answers.
    for (content_type, accept) in [
        ("application/json; charset=utf-8", BOTH),
        ("Application/JSON; charset=\"UTF-8\"", BOTH),
        ("application/json", "*/*"),
        ("application/json", "application/*, text/*"),
    ] {
        let answer = serve
            .send_exactly(
                "POST",
                "/mcp",
                &[("content-type", content_type), ("accept", accept)],
                &initialize_body(),
            )
            .await;
        assert_eq!(
            answer.status, 200,
            "{content_type} / {accept}: {}",
            answer.body
        );
    }
}
