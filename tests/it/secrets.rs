//! Secrets never reach stdout or stderr, at any log level, on any path, success or error.

use crate::common::*;
use serde_json::json;

const TOKEN: &str = "tok-SECRET-0f9e8d7c";
const KEY: &str = "key-SECRET-1a2b3c4d";
const QUERY: &str = "qs-SECRET-5e6f";

#[tokio::test]
async fn tokens_headers_and_url_secrets_never_appear_in_output() {
    let upstream = Upstream::start(|seen| {
        let request = seen.json();
        match request["method"].as_str() {
            Some("tools/call") => Reply::Status(401),
            Some("tools/list") => Reply::Abort,
            Some("prompts/list") => Reply::Json {
                status: 500,
                body: "internal".into(),
                headers: vec![],
            },
            _ => basic(seen),
        }
    })
    .await;
    let url = format!(
        "{}?api_key={QUERY}",
        upstream.url.replace("http://", "http://user:pw-SECRET@")
    );
    let header = "X-Api-Key: ${TEST_API_KEY}";
    let mut relay = Relay::start_with_env(
        &url,
        &["-H", header, "--log-level", "trace", "--max-retries", "0"],
        &[("MCP_BEARER_TOKEN", TOKEN), ("TEST_API_KEY", KEY)],
    )
    .await;
    relay.initialize().await;
    let mut lines = Vec::new();
    for (id, method) in [
        (1, "tools/call"),
        (2, "tools/list"),
        (3, "prompts/list"),
        (4, "ping"),
    ] {
        relay
            .send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":{}}))
            .await;
        lines.push(relay.recv_line().await);
    }
    relay.close_stdin();
    assert_eq!(relay.wait_exit().await.code(), Some(0));
    lines.extend(relay.rest_of_stdout().await);

    // The channel was alive: the credentials did reach the upstream.
    let seen = upstream.posts_of("initialize");
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {TOKEN}"))
    );
    assert_eq!(seen[0].header("x-api-key").as_deref(), Some(KEY));
    assert!(
        relay.stderr().contains("HTTP") || relay.stderr().contains("upstream"),
        "logging was on: {}",
        relay.stderr()
    );

    let everything = format!("{}\n{}", lines.join("\n"), relay.stderr());
    for secret in [TOKEN, KEY, QUERY, "pw-SECRET"] {
        assert!(
            !everything.contains(secret),
            "{secret} leaked into:\n{everything}"
        );
    }
}
