//! `mcp-stdio check`: the report's JSON fields and the exit code against serve in each
//! auth mode, an unreachable port and an HTTP server that is not MCP; bad arguments exit 2;
//! a credential given never appears in the output, even at trace level.

use std::process::Stdio;

use serde_json::Value;

use crate::common::serve::*;
use crate::common::signin::sign_in;
use crate::common::{DEADLINE, binary};

/// The names of a check report's timed steps, in order.
pub fn step_names(report: &Value) -> Vec<&str> {
    report["timings"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect()
}

/// Runs `mcp-stdio check ARGS --json`; returns (exit code, report, stderr).
async fn check(args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let mut command = tokio::process::Command::new(binary());
    command
        .arg("check")
        .args(args)
        .arg("--json")
        .env_remove("MCP_BEARER_TOKEN")
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("mcp-stdio-check-state-none"),
        )
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/mcp-stdio-test-bus",
        )
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let output = tokio::time::timeout(DEADLINE, command.output())
        .await
        .expect("check finished")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let report =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    (
        output.status.code().unwrap_or(-1),
        report,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn an_open_serve_is_described_in_both_eras() {
    let serve = Serve::start(&[]).await;
    let (code, report, _) = check(&[&serve.url], &[]).await;
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["transport"], "streamable-http");
    assert_eq!(report["era"], "2026-07-28");
    assert_eq!(report["auth"]["required"], false);
    assert_eq!(report["auth"]["credential"], "none");
    assert!(
        report["counts"]["tools"]["total"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert_eq!(report["counts"]["tools"]["complete"], true);
    let steps = report["timings"]["steps"].as_array().unwrap();
    assert_eq!(steps[0]["step"], "server/discover");
    assert!(report["timings"]["total_ms"].as_f64().unwrap() > 0.0);

    // The same fixture behind a handshake-only serve: the negotiated revision, a session
    // that is ended at the end.
    let legacy = Serve::start(&["--legacy-only"]).await;
    let (code, report, _) = check(&[&legacy.url], &[]).await;
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["era"], "handshake");
    assert_eq!(report["protocol_version"], "2025-11-25");
    assert!(report["server"]["name"].is_string(), "{report}");
    let steps = step_names(&report);
    assert!(steps.contains(&"initialize"), "{steps:?}");
    assert_eq!(steps.last(), Some(&"DELETE (end the session)"));
}

#[tokio::test]
async fn a_shared_secret_is_asked_for_and_never_printed() {
    let secret = "check-secret-4bd1c0ffee";
    let serve = Serve::start_with(
        &[],
        &[fixture().as_str()],
        &[("MCP_STDIO_SERVE_TOKEN", secret)],
    )
    .await;
    let (code, report, _) = check(&[&serve.url], &[]).await;
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["ok"], false);
    assert_eq!(report["auth"]["required"], true);
    assert!(
        report["hint"].as_str().unwrap().contains("--bearer-token"),
        "{report}"
    );

    let (code, report, stderr) = check(
        &[&serve.url, "--log-level", "trace"],
        &[("MCP_BEARER_TOKEN", secret)],
    )
    .await;
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["auth"]["required"], true);
    assert_eq!(report["auth"]["credential"], "bearer-token");
    // The channel is alive (trace output was written), and the secret is in neither stream.
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG") || !stderr.is_empty(),
        "no trace output at all"
    );
    assert!(!report.to_string().contains(secret) && !stderr.contains(secret));

    let (code, report, _) = check(&[&serve.url, "--bearer-token", "wrong-token"], &[]).await;
    assert_eq!(code, 1);
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("credential given"),
        "{report}"
    );
}

#[tokio::test]
async fn an_embedded_authorization_server_is_discovered() {
    let dir = tempfile::tempdir().unwrap();
    let serve = crate::serve_oauth::start_as(&dir, &[]).await;
    let (code, report, _) = check(&[&serve.url], &[]).await;
    assert_eq!(code, 1, "{report}");
    let auth = &report["auth"];
    assert_eq!(auth["required"], true);
    assert!(
        auth["resource_metadata"]
            .as_str()
            .unwrap()
            .contains("/.well-known/oauth-protected-resource")
    );
    assert_eq!(
        auth["authorization_servers"].as_array().unwrap().len(),
        1,
        "{auth}"
    );
    assert!(auth["issuer"].is_string());
    assert_eq!(auth["dynamic_registration"], true);
    let grants = auth["grant_types_supported"].as_array().unwrap();
    assert!(grants.iter().any(|g| g == "authorization_code"), "{auth}");
    assert!(auth["problem"].is_null(), "{auth}");
    assert_eq!(
        report["hint"],
        format!(
            "needs a login: run `mcp-stdio login {}` (or check again with --oauth)",
            serve.url
        )
    );

    // A token from a sign-in is accepted, and never printed.
    let (_, tokens) = sign_in(&serve).await;
    let (code, report, stderr) = check(
        &[&serve.url, "--log-level", "debug"],
        &[("MCP_BEARER_TOKEN", &tokens.access)],
    )
    .await;
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["auth"]["credential"], "bearer-token");
    assert!(!report.to_string().contains(&tokens.access) && !stderr.contains(&tokens.access));
}

#[tokio::test]
async fn an_unreachable_port_and_a_web_page_are_not_mcp() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{closed}/mcp");
    let (code, report, _) = check(&[&url], &[]).await;
    assert_eq!(code, 1);
    assert_eq!(report["ok"], false);
    assert!(report["transport"].is_null());
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains(&format!("cannot reach 127.0.0.1:{closed}")),
        "{report}"
    );
    assert!(
        report["hint"]
            .as_str()
            .unwrap()
            .contains("is the server running")
    );

    // A web server that answers every request with a page.
    let app = axum::Router::new().fallback(|| async {
        (
            [(http::header::CONTENT_TYPE, "text/html")],
            "<html><body>welcome</body></html>",
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://127.0.0.1:{port}/");
    let (code, report, _) = check(&[&url], &[]).await;
    assert_eq!(code, 1, "{report}");
    assert!(report["era"].is_null());
    assert!(
        report["error"].as_str().unwrap().contains("text/html"),
        "{report}"
    );
    assert!(
        report["hint"].as_str().unwrap().contains("MCP endpoint"),
        "{report}"
    );
}

#[tokio::test]
async fn bad_arguments_exit_2() {
    for args in [
        vec!["check"],
        vec!["check", "ftp://x/"],
        vec!["check", "http://127.0.0.1:1/mcp", "--max-pages", "0"],
    ] {
        let output = tokio::process::Command::new(binary())
            .args(&args)
            .output()
            .await
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty());
    }
}

#[tokio::test]
async fn max_pages_bounds_the_count() {
    // A server whose tool list never ends: every page names a next one.
    let upstream = crate::common::Upstream::start(|seen| {
        crate::common::standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            let page = request["params"]["cursor"].as_str().map_or(0, |c| c.parse::<u64>().unwrap() + 1);
            crate::common::json_reply(crate::common::result_for(
                &request,
                serde_json::json!({"tools": [{"name": format!("t{page}a")}, {"name": format!("t{page}b")}], "nextCursor": page.to_string()}),
            ))
        })
    })
    .await;
    let (code, report, _) = check(&[&upstream.url, "--max-pages", "3"], &[]).await;
    assert_eq!(code, 0, "{report}");
    let tools = &report["counts"]["tools"];
    assert_eq!(tools["pages"], 3, "{report}");
    assert_eq!(tools["first_page"], 2);
    assert_eq!(tools["total"], 6);
    assert_eq!(tools["complete"], false);
    let seen = upstream.wait_for_method("tools/list").await;
    let lists = seen
        .iter()
        .filter(|s| s.rpc_method().as_deref() == Some("tools/list"));
    assert_eq!(lists.count(), 3);
}
