//! The relay's `--audit-log`: one line per host request with the host's client, the
//! upstream (no query, no user info), the target, the arguments' digest and the outcome the
//! host saw (ok, tool error, protocol error, cancelled); never on stdout, which is the
//! protocol; no bearer token in it.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::common::*;

fn handler(release: Arc<Notify>) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |seen: &Seen| {
        if let Some(reply) = standard(seen) {
            return reply;
        }
        let request = seen.json();
        let result = match request["params"]["name"].as_str() {
            Some("fail") => json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
            Some("bad") => {
                return json_reply(
                    json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32602, "message": "unknown tool"}}),
                );
            }
            Some("hang") => {
                let answer = result_for(&request, json!({"content": []}));
                return Reply::Delayed(release.clone(), Box::new(json_reply(answer)));
            }
            _ => json!({"content": [{"type": "text", "text": "fine"}]}),
        };
        json_reply(result_for(&request, result))
    }
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn each_host_request_is_one_line_with_what_the_host_saw() {
    let release = Arc::new(Notify::new());
    let upstream = Upstream::start(handler(release.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("relay-audit.log");
    let url = format!("{}?key=sekrit-query", upstream.url);
    let mut relay = Relay::start_with_env(
        &url,
        &[
            "--audit-log",
            log.to_str().unwrap(),
            "--protocol-era",
            "legacy",
        ],
        &[("MCP_BEARER_TOKEN", "tok-abcdefghijklmnopqrstuvwxyz")],
    )
    .await;
    relay.initialize().await;
    let call = |id: u64, name: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {"q": id}}});
    relay.send(call(1, "fine")).await;
    assert_eq!(relay.recv().await["id"], 1);
    relay.send(call(2, "fail")).await;
    assert_eq!(relay.recv().await["result"]["isError"], true);
    relay.send(call(3, "bad")).await;
    assert_eq!(relay.recv().await["error"]["code"], -32602);
    relay.send(call(4, "hang")).await;
    upstream
        .wait_until("the hanging call", |seen| {
            seen.iter().any(|s| s.json()["params"]["name"] == "hang")
        })
        .await;
    relay
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}))
        .await;
    // The channel is alive after the cancellation, and nothing but answers reached stdout.
    assert!(relay.ping_through("after").await.is_empty());
    release.notify_waiters();

    let found = eventually("the relay's audit lines", async || {
        let found = lines(&log);
        let calls = found.iter().filter(|l| l["method"] == "tools/call").count();
        (calls == 4)
            .then_some(found.clone())
            .ok_or(format!("{found:?}"))
    })
    .await;
    let by_id = |id: u64| {
        found
            .iter()
            .find(|l| l["id"] == id && l["method"] == "tools/call")
            .unwrap()
    };
    assert_eq!(by_id(1)["outcome"], "ok");
    assert_eq!(by_id(2)["outcome"], "tool_error");
    assert_eq!(by_id(3)["outcome"], "protocol_error");
    assert_eq!(by_id(3)["error_code"], -32602);
    assert_eq!(by_id(4)["outcome"], "cancelled");
    let first = by_id(1);
    assert_eq!(first["name"], "fine");
    assert_eq!(first["client"], host_client());
    assert!(
        first["arguments_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let server = first["server"].as_str().unwrap();
    assert!(
        server.starts_with("http://127.0.0.1:") && !server.contains('?'),
        "{server}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("sekrit") && !text.contains("tok-abcdefghijklmnopqrstuvwxyz"),
        "{text}"
    );
    assert!(
        found.iter().any(|l| l["method"] == "initialize"),
        "{found:?}"
    );
}

/// `name/version` of the host the test's `initialize` names.
fn host_client() -> String {
    let info = &host_initialize_params()["clientInfo"];
    format!(
        "{}/{}",
        info["name"].as_str().unwrap(),
        info["version"].as_str().unwrap()
    )
}

#[test]
fn the_relay_refuses_an_audit_log_on_its_stdout() {
    let (code, out, err) = run_to_end(&["http://127.0.0.1:9/mcp", "--audit-log", "-"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("the relay's stdout is the protocol"), "{err}");
}
