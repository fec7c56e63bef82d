//! The sandbox's refusals as RFC 9457 problem documents, the structural guard in front of
//! every tool, and the FIFO queue of `--max-concurrent-calls` with its `--queue-wait`.

use serde_json::{Value, json};

use crate::common::sandbox::Sandbox;

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("project");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.txt"), "alpha\n").unwrap();
    std::fs::write(root.join("blob.bin"), [0xff, 0xfe, 0x00, 0x81]).unwrap();
    std::fs::write(top.path().join("outside.txt"), "OUTSIDE").unwrap();
    (top, root)
}

/// The problem document of an in-band refusal, after checking its fixed parts.
fn problem<'a>(result: &'a Value, raw: &str, code: &str, status: u64) -> &'a Value {
    assert_eq!(result["isError"], true, "{raw}");
    let problem = crate::common::sandbox::problem_of(result, raw);
    assert_eq!(problem["code"], code, "{raw}");
    assert_eq!(problem["status"], status, "{raw}");
    let slug = code
        .trim_start_matches("MCP_")
        .to_ascii_lowercase()
        .replace('_', "-");
    assert_eq!(problem["type"], format!("urn:mcp-stdio:problem:{slug}"));
    assert!(problem["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(problem["detail"].as_str().is_some_and(|d| !d.is_empty()));
    assert_eq!(problem["error"], problem["detail"], "the old field is kept");
    assert!(
        problem["remedy"].as_str().is_some_and(|r| !r.is_empty()),
        "{raw}"
    );
    problem
}

#[tokio::test]
async fn every_refusal_is_a_problem_document_with_a_stable_code() {
    let (_top, root) = workspace();
    let mut sandbox = Sandbox::legacy(&root, &[]).await;
    let (result, raw) = sandbox
        .tool("read_file", json!({"path": "../outside.txt"}))
        .await;
    let denied = problem(&result, &raw, "MCP_ACCESS_DENIED", 403);
    assert_eq!(denied["invalid_params"], json!(["path"]));
    assert!(!raw.contains("OUTSIDE"), "{raw}");

    let (result, raw) = sandbox
        .tool("file_info", json!({"path": "src/missing.txt"}))
        .await;
    problem(&result, &raw, "MCP_NOT_FOUND", 404);

    let (result, raw) = sandbox
        .tool("list_directory", json!({"glob": "[unclosed"}))
        .await;
    let invalid = problem(&result, &raw, "MCP_VALIDATION_ERROR", 422);
    assert_eq!(invalid["invalid_params"], json!(["glob"]));

    let (result, raw) = sandbox
        .tool("search_text", json!({"pattern": "(unclosed"}))
        .await;
    let invalid = problem(&result, &raw, "MCP_VALIDATION_ERROR", 422);
    assert_eq!(invalid["invalid_params"], json!(["pattern"]));

    let (result, raw) = sandbox.tool("read_file", json!({"path": "blob.bin"})).await;
    problem(&result, &raw, "MCP_UNSUPPORTED_CONTENT", 415);

    let mut hurried = Sandbox::legacy(&root, &["--call-timeout", "0.000001"]).await;
    let (result, raw) = hurried
        .tool("search_text", json!({"pattern": "alpha"}))
        .await;
    let late = problem(&result, &raw, "MCP_EXECUTION_TIMEOUT", 504);
    assert_eq!(late["invalid_params"], json!([]));

    // Malformed calls are protocol errors, with the problem document as their data.
    let (unknown, raw) = sandbox
        .request("tools/call", json!({"name": "rm_rf", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{raw}");
    assert_eq!(unknown["error"]["data"]["code"], "MCP_VALIDATION_ERROR");
    assert_eq!(unknown["error"]["data"]["invalid_params"], json!(["name"]));
    let (extra, raw) = sandbox
        .request(
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "a", "mode": "w"}}),
        )
        .await;
    assert_eq!(
        extra["error"]["data"]["invalid_params"],
        json!(["mode"]),
        "{raw}"
    );
    assert_eq!(extra["error"]["data"]["status"], 422);
}

/// Sends a tools/call as a raw line and returns its answer; asserts it is a -32602 whose
/// problem document names `field` and whose message says `what`.
async fn guarded(sandbox: &mut Sandbox, id: u64, params: &str, field: &str, what: &str) {
    sandbox
        .peer
        .send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#
        ))
        .await;
    let raw = sandbox.recv_raw().await;
    let answer: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(answer["id"], id, "{raw}");
    assert_eq!(answer["error"]["code"], -32602, "{params}: {raw}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains(what), "{params}: {raw}");
    assert_eq!(
        answer["error"]["data"]["invalid_params"],
        json!([field]),
        "{params}: {raw}"
    );
    assert!(
        !message.contains(|c: char| c.is_control() || ('\u{202A}'..='\u{2069}').contains(&c)),
        "the refusal does not echo what it refused: {raw}"
    );
}

#[tokio::test]
async fn the_structural_guard_refuses_before_the_schema_or_any_tool() {
    let (_top, root) = workspace();
    let mut sandbox = Sandbox::legacy(&root, &[]).await;
    // The channel works: a plain call is answered.
    let (fine, raw) = sandbox
        .tool("read_file", json!({"path": "src/a.txt"}))
        .await;
    assert_eq!(fine["isError"], false, "{raw}");

    // Nine levels: the guard speaks before the schema (which would call `x` unknown).
    let deep = r#"{"name":"read_file","arguments":{"path":"src/a.txt","x":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}}}"#;
    guarded(
        &mut sandbox,
        1,
        deep,
        "x.a.a.a.a.a.a.a",
        "--max-argument-depth",
    )
    .await;
    let many = format!(
        r#"{{"name":"read_file","arguments":{{"path":"src/a.txt","x":[{}]}}}}"#,
        vec!["0"; 1000].join(",")
    );
    guarded(&mut sandbox, 2, &many, "x[998]", "--max-argument-items").await;
    let cases = [
        (
            r#"{"name":"read_file","arguments":{"path":"bad\u0000name"}}"#,
            "path",
            "control character",
        ),
        (
            r#"{"name":"read_file","arguments":{"path":"\u001b[2Jsrc/a.txt"}}"#,
            "path",
            "control character",
        ),
        (
            r#"{"name":"read_file","arguments":{"path":"src/\u202etxt.a"}}"#,
            "path",
            "bidirectional",
        ),
        (
            r#"{"name":"search_text","arguments":{"pattern":"a\u2066b"}}"#,
            "pattern",
            "bidirectional",
        ),
        (
            r#"{"name":"read_file","arguments":{"path":"src/a.txt","\u0007":1}}"#,
            "\\u{7}",
            "control character",
        ),
        (
            r#"{"name":"read_file","arguments":{"path":"\ud800"}}"#,
            "path",
            "lone surrogate",
        ),
        (
            r#"{"name":"read_file","arguments":{"path":"src/\udfff.txt"}}"#,
            "path",
            "lone surrogate",
        ),
        (
            r#"{"name":"read_file\u202e","arguments":{"path":"src/a.txt"}}"#,
            "name",
            "bidirectional",
        ),
    ];
    for (i, (params, field, what)) in cases.into_iter().enumerate() {
        guarded(&mut sandbox, 10 + i as u64, params, field, what).await;
    }
    // Still serving, and a query may span lines.
    let (fine, raw) = sandbox
        .tool("search_text", json!({"pattern": "al\npha|alpha\t?"}))
        .await;
    assert_eq!(fine["isError"], false, "{raw}");
}

#[tokio::test]
async fn the_guards_bounds_follow_their_flags() {
    let (_top, root) = workspace();
    let mut tight = Sandbox::legacy(
        &root,
        &["--max-argument-depth", "1", "--max-argument-items", "1"],
    )
    .await;
    let (fine, raw) = tight.tool("read_file", json!({"path": "src/a.txt"})).await;
    assert_eq!(fine["isError"], false, "one item at depth 1 passes: {raw}");
    let two = r#"{"name":"read_file","arguments":{"path":"src/a.txt","max_bytes":3}}"#;
    guarded(&mut tight, 1, two, "max_bytes", "more than 1 entries").await;
    let nested = r#"{"name":"read_file","arguments":{"path":["src/a.txt"]}}"#;
    guarded(&mut tight, 2, nested, "path", "at most 1 are allowed").await;
}

#[tokio::test]
async fn calls_past_the_cap_wait_their_turn_in_order() {
    let (_top, root) = workspace();
    // One slot; system_metrics holds it for 100 ms; the default wait is 5 s.
    let mut one = Sandbox::legacy(&root, &["--max-concurrent-calls", "1"]).await;
    let ids = ["a", "b", "c", "d", "e", "f"];
    // One write: the sandbox reads them all at once, so only a queue kept in arrival
    // order (not the order its tasks get scheduled) answers them in this order.
    let burst: Vec<String> = ids
        .iter()
        .map(|id| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"system_metrics","arguments":{}}}).to_string())
        .collect();
    one.peer.send_raw(&burst.join("\n")).await;
    let mut order = Vec::new();
    for _ in ids {
        let answer: Value = serde_json::from_str(&one.recv_raw().await).unwrap();
        assert_eq!(
            answer["result"]["isError"], false,
            "none was refused: {answer}"
        );
        order.push(answer["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(order, ids, "first come, first served");
}
