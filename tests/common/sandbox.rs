//! `mcp-stdio sandbox` on the shared stdio driver, for the sandbox's test modules.

use std::path::Path;

use serde_json::{Value, json};

use super::stdio::StdioPeer;

/// The sandbox on the shared stdio driver, numbering its own requests.
pub struct Sandbox {
    pub peer: StdioPeer,
    next: u64,
}

impl Sandbox {
    pub async fn start(root: &Path, flags: &[&str]) -> Self {
        let mut command = tokio::process::Command::new(crate::common::binary());
        command.arg("sandbox").arg("--root").arg(root).args(flags);
        Sandbox {
            peer: StdioPeer::spawn(command),
            next: 100,
        }
    }

    pub async fn send(&mut self, message: &Value) {
        self.peer.send(message.clone()).await;
    }

    pub async fn recv_raw(&mut self) -> String {
        self.peer.recv_line().await
    }

    pub async fn request(&mut self, method: &str, params: Value) -> (Value, String) {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let raw = self.recv_raw().await;
        let answer: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(answer["id"], id, "{raw}");
        (answer, raw)
    }

    pub async fn legacy(root: &Path, flags: &[&str]) -> Self {
        let mut sandbox = Self::start(root, flags).await;
        let (init, _) = sandbox
            .request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        sandbox
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        sandbox
    }

    pub async fn tool(&mut self, name: &str, arguments: Value) -> (Value, String) {
        let (answer, raw) = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        (answer["result"].clone(), raw)
    }
}

/// The problem document of an in-band refusal, after checking where it travels: in `_meta`,
/// the same as the JSON text block after the words, and never as `structuredContent` (which
/// must match the tool's `outputSchema`; the TypeScript client validates it on errors too).
pub fn problem_of<'a>(result: &'a Value, raw: &str) -> &'a Value {
    assert_eq!(result["isError"], true, "{raw}");
    assert!(
        result.get("structuredContent").is_none(),
        "a refusal carries no structuredContent: {raw}"
    );
    let problem = &result["_meta"]["mcp-stdio/problem"];
    assert!(problem.is_object(), "{raw}");
    let words = result["content"][0]["text"].as_str().unwrap_or_default();
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(
        !detail.is_empty() && words.starts_with(detail),
        "the first block says what was refused: {raw}"
    );
    let block: Value = serde_json::from_str(result["content"][1]["text"].as_str().unwrap())
        .expect("the second block is the problem as JSON");
    assert_eq!(&block, problem, "{raw}");
    problem
}
