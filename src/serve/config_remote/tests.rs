//! A remote entry made the relay's command: transport, headers in the environment, the
//! OAuth client's flags and secret, and the enterprise logins' flags.

use super::*;

fn keys(url: Option<&str>, headers: &BTreeMap<String, String>) -> RemoteKeys {
    RemoteKeys {
        url: url.map(str::to_owned),
        headers: headers.clone(),
        ..RemoteKeys::default()
    }
}

fn env(name: &str) -> Option<String> {
    (name == "API_TOKEN").then(|| "s3cret-token".to_owned())
}

#[test]
fn a_remote_entry_becomes_the_relay_with_its_headers_out_of_the_command_line() {
    let headers = BTreeMap::from([("Authorization".to_owned(), "Bearer ${API_TOKEN}".to_owned())]);
    let command = command(
        "saas",
        "http",
        &keys(Some("https://mcp.example.com/mcp"), &headers),
        Vec::new(),
        Path::new("."),
        &env,
    )
    .unwrap();
    assert_eq!(
        command.argv[1..4],
        [
            "https://mcp.example.com/mcp",
            "--transport",
            "streamable-http"
        ]
    );
    assert_eq!(
        command.argv[4..],
        ["-H", "Authorization: ${MCP_STDIO_REMOTE_HEADER_0}"]
    );
    assert!(
        !command.argv.iter().any(|a| a.contains("s3cret")),
        "{:?}",
        command.argv
    );
    assert_eq!(
        command.env,
        [(
            "MCP_STDIO_REMOTE_HEADER_0".to_owned(),
            "Bearer s3cret-token".to_owned()
        )]
    );
    let sse = super::command(
        "old",
        "sse",
        &keys(Some("http://127.0.0.1:9/sse"), &BTreeMap::new()),
        Vec::new(),
        Path::new("."),
        &env,
    )
    .unwrap();
    assert_eq!(sse.argv[3], "sse");
}

fn with_oauth(oauth: serde_json::Value) -> Result<ChildCommand, String> {
    let raw = serde_json::json!({"url": "https://mcp.example.com/mcp", "oauth": oauth});
    let keys: RemoteKeys = serde_json::from_value(raw).map_err(|e| e.to_string())?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    command("saas", "http", &keys, Vec::new(), dir, &env)
}

#[test]
fn the_enterprise_logins_reach_the_relay_as_flags() {
    let workload = with_oauth(serde_json::json!({
        "workloadTokenFile": "Cargo.toml", "dpop": "always"}))
    .unwrap();
    let flags = workload.argv[4..].join(" ");
    assert!(
        flags.starts_with("--dpop always --workload-token-file /"),
        "{flags}"
    );
    let enterprise = with_oauth(serde_json::json!({
        "idp_issuer": "https://login.example.com", "idp_client_id": "mcp-stdio",
        "idp_id_token_file": "Cargo.toml", "client_id": "wiki", "client_secret": "${API_TOKEN}"}))
    .unwrap();
    let flags = enterprise.argv[4..].join(" ");
    assert!(
        flags.starts_with(
            "--idp-issuer https://login.example.com --idp-client-id mcp-stdio --idp-id-token-file /"
        ) && flags.ends_with("--client-id wiki"),
        "{flags}"
    );
    let cases = [
        (
            serde_json::json!({"dpop": "sometimes"}),
            "always, auto or never",
        ),
        (
            serde_json::json!({"workload_token_file": "Cargo.toml", "client_id": "g", "client_secret": "x"}),
            "a login of its own",
        ),
        (
            serde_json::json!({"workload_token_file": "absent.jwt"}),
            "is not a file",
        ),
        (serde_json::json!({"idp_client_id": "c"}), "add idp_issuer"),
        (
            serde_json::json!({"idp_issuer": "https://i"}),
            "needs idp_client_id",
        ),
    ];
    for (oauth, needle) in cases {
        let e = with_oauth(oauth.clone()).unwrap_err();
        assert!(e.contains(needle), "{oauth}: {e}");
    }
}

#[test]
fn an_oauth_client_reaches_the_relay_as_flags_with_its_secret_in_the_environment() {
    let command = with_oauth(serde_json::json!({
        "clientId": "gateway", "client_secret": "${API_TOKEN}", "client_credentials": true,
        "scope": "read write", "token_store": "file", "callbackPort": 8080,
    }))
    .unwrap();
    let flags = command.argv[4..].join(" ");
    assert_eq!(
        flags,
        "--client-id gateway --client-credentials --oauth-scope read write --token-store file"
    );
    assert!(!command.argv.iter().any(|a| a.contains("s3cret")));
    assert!(command.env.contains(&(
        "MCP_OAUTH_CLIENT_SECRET".to_owned(),
        "s3cret-token".to_owned()
    )));
    assert_eq!(
        command.env_remove,
        ["MCP_BEARER_TOKEN", "MCP_OAUTH_CLIENT_ID"]
    );
    // A key file is found from the config file's folder.
    let keyed =
        with_oauth(serde_json::json!({"client_id": "g", "client_key": "Cargo.toml"})).unwrap();
    assert!(keyed.argv.iter().any(|a| a.ends_with("/Cargo.toml")));
    // No oauth: serve's own client settings never reach the relay.
    let plain = with_oauth(serde_json::json!({})).unwrap();
    assert!(
        plain
            .env_remove
            .contains(&"MCP_OAUTH_CLIENT_SECRET".to_owned())
    );
    let cases = [
        (serde_json::json!({"client_secret": "x"}), "add client_id"),
        (
            serde_json::json!({"client_id": "g", "client_credentials": true}),
            "needs client_secret",
        ),
        (
            serde_json::json!({"client_id": "g", "client_key": "nope.pem"}),
            "is not a file",
        ),
        (
            serde_json::json!({"client_id": "g", "token_store": "cloud"}),
            "auto, keyring or file",
        ),
        (
            serde_json::json!({"client_id": "g", "password": "x"}),
            "unknown field",
        ),
    ];
    for (oauth, needle) in cases {
        let error = with_oauth(oauth.clone()).unwrap_err();
        assert!(error.contains(needle), "{oauth}: {error}");
    }
}

#[test]
fn bad_remote_entries_say_what_works() {
    let none = BTreeMap::new();
    let cases = [
        ("ws", Some("wss://x/mcp"), "use \"stdio\""),
        ("http", None, "needs a `url`"),
        ("http", Some("ftp://x/mcp"), "http:// or https://"),
        ("http", Some("${NOPE}/mcp"), "NOPE"),
    ];
    for (kind, url, needle) in cases {
        let error = command(
            "r",
            kind,
            &keys(url, &none),
            Vec::new(),
            Path::new("."),
            &env,
        )
        .unwrap_err();
        assert!(error.contains(needle), "{kind} {url:?}: {error}");
    }
    let bad = BTreeMap::from([("Bad Header".to_owned(), "x".to_owned())]);
    assert!(
        command(
            "r",
            "http",
            &keys(Some("https://x/mcp"), &bad),
            Vec::new(),
            Path::new("."),
            &env
        )
        .unwrap_err()
        .contains("not a header name")
    );
    let broken = BTreeMap::from([("X-Key".to_owned(), "a\nb".to_owned())]);
    let error = command(
        "r",
        "http",
        &keys(Some("https://x/mcp"), &broken),
        Vec::new(),
        Path::new("."),
        &env,
    )
    .unwrap_err();
    assert!(
        error.contains("not a header value") && !error.contains("a\nb"),
        "{error}"
    );
    let secret_url = command(
        "r",
        "http",
        &keys(Some("https://me:pw@x/mcp"), &none),
        Vec::new(),
        Path::new("."),
        &env,
    )
    .unwrap_err();
    assert!(
        secret_url.contains("give them as a header") && !secret_url.contains("pw@"),
        "{secret_url}"
    );
    let shown_line = shown(&["relay".into(), "https://x/mcp?key=k3y".into()]);
    assert_eq!(shown_line, "relay https://x/mcp?…");
}
