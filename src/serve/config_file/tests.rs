//! The config file's parsing, case by case: both formats, bounds, auth, remote entries,
//! aggregates and the errors that say what works.
use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "HOME_DIR" => Some("/tmp".into()),
        "TEAM_TOKEN" => Some("t0ken".into()),
        _ => None,
    }
}

fn parsed(text: &str, file: &str) -> Result<Vec<Entry>, String> {
    parse(text, Path::new(file), &env).map(|loaded| loaded.entries)
}

#[test]
fn the_mcp_json_form_with_env_expansion() {
    let text = r#"{"mcpServers": {
        "files": {"type": "stdio", "command": "sh", "args": ["-c", "${HOME_DIR}/x"], "env": {"A": "${MISSING:-d}"}, "alwaysAllow": []},
        "remote": {"type": "http", "url": "https://example.com/mcp"}
    }}"#;
    let entries = parsed(text, ".mcp.json").unwrap();
    assert_eq!(
        entries.len(),
        2,
        "the http server is reached through the relay"
    );
    let remote = entries.iter().find(|e| e.name == "remote").unwrap();
    assert_eq!(remote.command.argv[1], "https://example.com/mcp");
    let entries: Vec<Entry> = entries.into_iter().filter(|e| e.name == "files").collect();
    assert_eq!(entries[0].name, "files");
    assert_eq!(entries[0].command.argv, ["sh", "-c", "/tmp/x"]);
    assert_eq!(entries[0].command.env, [("A".to_owned(), "d".to_owned())]);
}

#[test]
fn the_toml_form_with_bounds_and_auth() {
    let text = r#"
        [servers.docs]
        command = "sh"
        max_sessions = 3
        session_idle_ttl = 0
        child_era = "legacy"
        auth = { mode = "token", token_env = "TEAM_TOKEN" }
    "#;
    let entries = parsed(text, "serve.toml").unwrap();
    let docs = &entries[0];
    assert_eq!(docs.max_sessions, Some(3));
    assert_eq!(docs.session_idle_ttl, Some(None));
    assert_eq!(docs.child_era, Some(ChildEraChoice::Legacy));
    assert!(
        matches!(&docs.auth, Some(EntryAuth::Token { variable, .. }) if variable == "TEAM_TOKEN")
    );
}

#[test]
fn mistakes_say_what_would_work() {
    let cases = [
        (
            "[servers.x]\ncomand = \"sh\"\n",
            "t.toml",
            "unknown key(s) comand",
        ),
        (
            "[servers.\"a/b\"]\ncommand = \"sh\"\n",
            "t.toml",
            "cannot be a path segment",
        ),
        (
            "[servers.x]\ncommand = \"sh\"\nmax_sessions = 0\n",
            "t.toml",
            "max_sessions 0: use 1 to",
        ),
        (
            "[servers.x]\ncommand = \"sh\"\nargs = [\"${NOPE}\"]\n",
            "t.toml",
            "variable NOPE is not set",
        ),
        (
            "[servers.x]\ncommand = \"no-such-program-here\"\n",
            "t.toml",
            "cannot find the command",
        ),
        (
            "[servers.x]\ncommand = \"sh\"\nauth = { mode = \"token\", token_env = \"UNSET\" }\n",
            "t.toml",
            "UNSET: the variable is not set",
        ),
        (
            "[servers.x]\ncommand = \"sh\"\nchild_era = \"new\"\n",
            "t.toml",
            "use auto, legacy or modern",
        ),
        (
            "[servers.x]\ncommand = \"sh\"\nspare_children = 1\nspare_idle_ttl = 60\n",
            "t.toml",
            "leave out spare_idle_ttl, or leave out spare_children",
        ),
        (
            "[servers.x]\ncommand = \"sh\"\nspare_idle_ttl = -1\n",
            "t.toml",
            "spare_idle_ttl -1: use seconds from 0 (never) to 86400",
        ),
        ("{\"mcpServers\": {}}", "a.json", "no servers in it"),
        ("{\"other\": 1}", "a.json", "no servers"),
        ("{ not json", "a.json", "not valid JSON"),
        ("[servers.x\n", "t.toml", "not valid TOML"),
    ];
    for (text, file, needle) in cases {
        let error = parsed(text, file).unwrap_err();
        assert!(error.contains(needle), "{text:?}: {error}");
    }
}
