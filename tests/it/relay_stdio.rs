//! The stdio side: one compact line per message, faithful bytes, bad input answered and
//! survived, batches answered as batches, and nothing written for a 202.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn garbage_invalid_and_over_long_lines_are_answered_and_the_relay_keeps_going() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start(&upstream.url, &["--max-message-size", "1024"]).await;
    relay.send_raw("this is not json").await;
    let parse_error = relay.recv().await;
    assert_eq!(parse_error["error"]["code"], -32700);
    assert_eq!(parse_error["id"], json!(null));

    relay.send_raw(r#"{"jsonrpc":"2.0","id":5}"#).await;
    let invalid = relay.recv().await;
    assert_eq!(
        (invalid["id"].clone(), invalid["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );

    relay
        .send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"pad":"{}"}}}}"#,
            "x".repeat(4000)
        ))
        .await;
    let too_long = relay.recv().await;
    assert_eq!(too_long["error"]["code"], -32600);
    assert!(
        too_long["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-message-size (1024 bytes)")
    );

    relay.send_raw("").await; // blank lines are ignored
    relay
        .send_raw("{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"ping\"}\r")
        .await;
    assert_eq!(relay.recv().await["id"], "crlf");
    assert!(relay.ping_through("still-alive").await.is_empty());
}

#[tokio::test]
async fn a_batch_is_answered_with_one_array() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":2,"method":"prompts/list"}]"#)
        .await;
    let batch = relay.recv().await;
    let mut ids: Vec<i64> = batch
        .as_array()
        .expect("an array")
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    upstream
        .wait_for_method("notifications/roots/list_changed")
        .await;
    relay.send_raw("[]").await;
    assert_eq!(relay.recv().await["error"]["code"], -32600);
}

#[tokio::test]
async fn pretty_bodies_become_one_line_with_values_untouched() {
    let big_id = "12345678901234567890123";
    let upstream = Upstream::start(move |seen| {
        standard(seen).unwrap_or_else(|| {
            // Echo the raw id text: a faithful server keeps big integers exact.
            let id_text = seen.body.split("\"id\":").nth(1).unwrap().split(',').next().unwrap().to_owned();
            let body = format!(
                "{{\n  \"jsonrpc\": \"2.0\",\n  \"id\": {id_text},\n  \"result\": {{\n    \"zeta\": 1.0e0,\n    \"alpha\": \"line\\nbreak \u{2028} sep\",\n    \"unknown\": {{\"x\": [1, 2]}}\n  }}\n}}\n"
            );
            Reply::Json { status: 200, body, headers: vec![] }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay
        .send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{big_id},"method":"tools/list"}}"#
        ))
        .await;
    let line = relay.recv_line().await;
    assert_eq!(
        line,
        format!(
            r#"{{"jsonrpc":"2.0","id":{big_id},"result":{{"zeta":1.0e0,"alpha":"line\nbreak \u2028 sep","unknown":{{"x":[1,2]}}}}}}"#
        )
    );
    // And the host's bytes reached the upstream unchanged too.
    assert!(upstream.posts_of("tools/list")[0].body.contains(big_id));
}

#[tokio::test]
async fn a_202_for_a_notification_or_an_answer_writes_nothing() {
    let upstream = Upstream::start(basic).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    relay.send(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}})).await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"srv-9","result":{}}))
        .await;
    upstream
        .wait_until("both posted", |s| {
            s.iter().any(|s| s.json()["id"] == "srv-9")
        })
        .await;
    let before = relay.ping_through("alive").await;
    assert!(
        before.is_empty(),
        "nothing may be written for a 202: {before:?}"
    );
}

#[tokio::test]
async fn a_202_for_a_request_is_an_error_that_says_so() {
    let upstream = Upstream::start(|seen| standard(seen).unwrap_or(Reply::Status(202))).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    relay.initialize().await;
    let answer = relay.call(json!(1), "tools/list", json!({})).await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 202"),
        "{answer}"
    );
}
