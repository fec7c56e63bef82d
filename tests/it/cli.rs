//! Startup: bad flags and environment values stop the program with exit code 2 and one
//! line that names the flag and what would be accepted; nothing reaches stdout.

use crate::common::run_to_end;

fn fails_with(args: &[&str], needle: &str) {
    let (code, stdout, stderr) = run_to_end(args);
    assert_eq!(code, 2, "args {args:?}: stderr {stderr}");
    assert!(stdout.is_empty(), "stdout must stay clean: {stdout}");
    assert!(
        stderr.contains(needle),
        "args {args:?}: expected {needle:?} in {stderr}"
    );
}

#[test]
fn bad_urls_are_refused_at_startup() {
    fails_with(&["not-a-url"], "is not valid");
    fails_with(&["ftp://example.com/mcp"], "http(s) URL with a host");
    fails_with(&["relay", "https://example.com/mcp#frag"], "#fragment");
    fails_with(&[], "Usage");
}

#[test]
fn bad_flag_values_name_the_flag() {
    fails_with(&["https://h/mcp", "--timeout-read", "0"], "--timeout-read");
    fails_with(
        &["https://h/mcp", "--timeout-connect", "nan"],
        "--timeout-connect",
    );
    fails_with(
        &["https://h/mcp", "--sse-read-timeout", "-1"],
        "--sse-read-timeout",
    );
    fails_with(
        &["https://h/mcp", "--max-message-size", "5"],
        "--max-message-size",
    );
    fails_with(
        &["https://h/mcp", "--max-in-flight", "0"],
        "--max-in-flight",
    );
    fails_with(&["https://h/mcp", "--log-format", "xml"], "--log-format");
    fails_with(
        &["https://h/mcp", "-H", "no-colon"],
        "expected 'Name: value'",
    );
    fails_with(
        &["https://h/mcp", "-H", "Bad Name: v"],
        "not a valid header name",
    );
    fails_with(
        &["https://h/mcp", "-H", "X-Key: ${MCP_STDIO_TEST_UNSET_VAR}"],
        "MCP_STDIO_TEST_UNSET_VAR is not set",
    );
    fails_with(
        &["https://h/mcp", "--ca-cert", "/nonexistent/ca.pem"],
        "--ca-cert",
    );
    fails_with(
        &["https://h/mcp", "--protocol-era", "2026"],
        "--protocol-era",
    );
    fails_with(
        &["https://h/mcp", "--max-input-rounds", "0"],
        "--max-input-rounds",
    );
    fails_with(
        &["https://h/mcp", "--input-timeout", "0"],
        "--input-timeout",
    );
    fails_with(
        &["https://h/mcp", "--keyring-timeout", "0"],
        "--keyring-timeout",
    );
    fails_with(
        &["login", "https://h/mcp", "--timeout-read", "0"],
        "--timeout-read",
    );
    fails_with(&["status", "--keyring-timeout", "x"], "--keyring-timeout");
    fails_with(
        &["logout", "--all", "--max-message-size", "5"],
        "--max-message-size",
    );
}

/// A "session bus" that accepts connections and never says a word: the keyring call
/// hangs, and `--keyring-timeout` is what ends it.
#[test]
fn a_keyring_that_never_answers_is_given_up_after_keyring_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("bus");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let held = std::thread::spawn(move || {
        // Accept, then hold the connections open without answering.
        let mut kept = Vec::new();
        for stream in listener.incoming().take(4) {
            kept.push(stream);
        }
    });
    let output = std::process::Command::new(crate::common::binary())
        .args([
            "status",
            "--token-store",
            "keyring",
            "--keyring-timeout",
            "0.5",
        ])
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", socket.display()),
        )
        .env("XDG_STATE_HOME", dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("did not answer within 0.5 s"), "{stderr}");
    drop(held);
}

#[test]
fn a_ca_file_that_is_not_pem_is_refused() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "not a certificate").unwrap();
    fails_with(
        &["https://h/mcp", "--ca-cert", file.path().to_str().unwrap()],
        "--ca-cert",
    );
}

#[test]
fn version_and_help_exit_zero() {
    let (code, stdout, _) = run_to_end(&["--version"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("mcp-stdio "));
    let (code, stdout, _) = run_to_end(&["relay", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--header",
        "--bearer-token",
        "--timeout-connect",
        "--timeout-read",
        "--sse-read-timeout",
        "--max-message-size",
        "--max-in-flight",
        "--no-cancel-filter",
        "--ca-cert",
        "--log-level",
        "--log-format",
    ] {
        assert!(stdout.contains(flag), "--help lists {flag}");
    }
}

#[test]
fn a_bad_environment_token_is_refused() {
    let output = std::process::Command::new(crate::common::binary())
        .arg("https://h/mcp")
        .env("MCP_BEARER_TOKEN", "abc\u{7}def")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("MCP_BEARER_TOKEN") && !stderr.contains("abc"),
        "{stderr}"
    );
}

#[test]
fn serve_takes_one_way_of_checking_callers() {
    let fixture = crate::common::serve::fixture();
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--port", "0"];
        args.extend_from_slice(extra);
        args.extend(["--", fixture.as_str()]);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let check = |extra: &[&str], needle: &str| {
        let args = serve(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&args, needle);
    };
    check(
        &["--enable-oauth", "--dev-user", "a", "--auth-token", "t0ken"],
        "not several",
    );
    check(
        &[
            "--enable-oauth",
            "--dev-user",
            "a",
            "--oauth-issuer",
            "https://login.example.com",
            "--public-url",
            "http://127.0.0.1/mcp",
        ],
        "not several",
    );
    check(&["--dev-user", "a"], "add --enable-oauth");
    check(&["--oauth-store", "sqlite:/tmp/x.db"], "add --enable-oauth");
    check(
        &["--enable-oauth", "--host", "0.0.0.0"],
        "needs --public-url",
    );
    check(
        &[
            "--enable-oauth",
            "--public-url",
            "http://mcp.example.com/mcp",
        ],
        "must be https",
    );
    check(
        &["--enable-oauth", "--oauth-store", "mysql://x"],
        "sqlite:PATH",
    );
    // A store on another host is not reached by a connection anyone on the path can
    // downgrade to plain text.
    check(
        &[
            "--enable-oauth",
            "--dev-user",
            "a",
            "--oauth-store",
            "postgres://mcp@db.internal/mcp?sslmode=prefer",
        ],
        "--oauth-store-allow-plaintext",
    );
    check(
        &[
            "--enable-oauth",
            "--dev-user",
            "a",
            "--oauth-store",
            "postgres://mcp@db.internal/mcp?sslmode=disable",
        ],
        "sslmode=disable",
    );
    check(
        &["--enable-oauth", "--trusted-user-header", "X User"],
        "--trusted-user-header",
    );
    check(
        &[
            "--enable-oauth",
            "--trusted-user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "127.0.0.1/32",
            "--dev-user",
            "alice",
        ],
        "cannot be used together",
    );
    check(
        &[
            "--enable-oauth",
            "--trusted-groups-header",
            "X-Forwarded-Groups",
            "--trusted-proxy",
            "127.0.0.1/32",
            "--dev-user",
            "alice",
        ],
        "--trusted-groups-header needs --trusted-user-header",
    );
    check(
        &[
            "--enable-oauth",
            "--trusted-user-header",
            "X-Forwarded-User",
            "--trusted-groups-header",
            "x-forwarded-user",
            "--trusted-proxy",
            "127.0.0.1/32",
        ],
        "name the same header",
    );
    check(
        &["--trusted-groups-header", "X-Forwarded-Groups"],
        "--trusted-groups-header",
    );
    check(
        &[
            "--enable-oauth",
            "--dev-user",
            "alice",
            "--login-groups-claim",
            "groups",
        ],
        "--login-groups-claim names a claim of --login-oidc",
    );
    check(&["--login-groups-claim", "groups"], "add --enable-oauth");
    check(
        &[
            "--enable-oauth",
            "--login-oidc",
            "https://login.example.com",
            "--principal-claim",
            "preferred_username",
        ],
        "--principal-claim-verified",
    );
    check(
        &[
            "--enable-oauth",
            "--dev-user",
            "a",
            "--principal-claim-verified",
        ],
        "belongs to --login-oidc",
    );
    check(
        &[
            "--enable-oauth",
            "--allow-redirect-uri",
            "http://app.example.com/cb",
        ],
        "--allow-redirect-uri",
    );
    check(
        &["--enable-oauth", "--refresh-token-ttl", "5"],
        "--refresh-token-ttl",
    );
    check(
        &["--enable-oauth", "--oauth-max-clients", "0"],
        "--oauth-max-clients",
    );
    check(&["--oauth-scope", "mcp"], "--enable-oauth");
    check(
        &[
            "--enable-oauth",
            "--allow-client-id-url",
            "http://app.example.com/c.json",
        ],
        "--allow-client-id-url",
    );
    check(
        &[
            "--enable-oauth",
            "--allow-client-id-url",
            "https://app.example.com/",
        ],
        "--allow-client-id-url",
    );
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef mcp-stdio"),
        ("fish", "complete -c mcp-stdio"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let (code, stdout, stderr) = run_to_end(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {stderr}");
        assert!(stdout.contains(marker), "{shell}: no {marker:?}");
        // Subcommands and their flags are in it, not only the top level.
        assert!(
            stdout.contains("check") && stdout.contains("--max-sessions"),
            "{shell}"
        );
    }
    let (code, _, stderr) = run_to_end(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bash"),
        "the error lists the shells: {stderr}"
    );
}

#[test]
fn the_man_page_renders_and_man_reads_it() {
    let (code, page, _) = run_to_end(&["manpage"]);
    assert_eq!(code, 0);
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH"),
        "{}",
        &page[..80.min(page.len())]
    );
    assert!(page.contains("mcp\\-stdio") && page.contains("check"));

    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_to_end(&["manpage", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let serve_page = std::fs::read_to_string(dir.path().join("mcp-stdio-serve.1")).unwrap();
    assert!(
        serve_page.contains("max\\-sessions"),
        "the serve page lists serve's flags"
    );
    assert!(dir.path().join("mcp-stdio.1").metadata().unwrap().len() > 1000);

    // `man -l` formats it where man is installed (Debian's man-db).
    if std::path::Path::new("/usr/bin/man").exists() {
        let shown = std::process::Command::new("man")
            .arg("-l")
            .arg(dir.path().join("mcp-stdio.1"))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
        assert!(
            text.contains("mcp-stdio") && text.contains("SUBCOMMANDS"),
            "{text}"
        );
    } else {
        eprintln!("man is not installed: the page was rendered but not read with man -l");
    }
    let (code, _, stderr) = run_to_end(&["manpage", "--dir", "/nonexistent/dir"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn an_unknown_serve_flag_is_named_not_taken_for_the_servers_command() {
    fails_with(
        &["serve", "--modern-clients"],
        "--modern-clients is not a flag of `mcp-stdio serve`",
    );
    fails_with(
        &["serve", "--config", "x.toml", "--no-such-flag"],
        "--no-such-flag is not a flag",
    );
}

#[test]
fn enterprise_login_flags_that_contradict_each_other_or_a_static_credential_are_refused() {
    let url = "https://h/mcp";
    for (flag, value) in [
        ("--workload-token-file", "/tmp/t"),
        ("--idp-issuer", "https://idp.example"),
        ("--dpop", "always"),
    ] {
        let mut args = vec![url, flag, value, "--bearer-token", "t"];
        if flag == "--idp-issuer" {
            args.extend(["--idp-client-id", "c", "--client-id", "x"]);
        }
        fails_with(&args, "a static credential turns OAuth off");
    }
    fails_with(
        &[
            url,
            "--workload-token-file",
            "/tmp/t",
            "--client-secret",
            "s",
        ],
        "--client-secret",
    );
    fails_with(
        &[
            url,
            "--workload-token-file",
            "/tmp/t",
            "--idp-issuer",
            "https://i",
        ],
        "--idp-issuer",
    );
    fails_with(
        &[
            url,
            "--idp-issuer",
            "https://idp.example",
            "--client-id",
            "x",
        ],
        "--idp-client-id",
    );
    fails_with(
        &[
            url,
            "--idp-issuer",
            "https://idp.example",
            "--idp-client-id",
            "c",
        ],
        "needs --client-id",
    );
    fails_with(
        &[
            url,
            "--idp-issuer",
            "http://idp.example",
            "--idp-client-id",
            "c",
            "--client-id",
            "x",
        ],
        "must be https",
    );
    fails_with(&[url, "--idp-id-token-file", "/tmp/t"], "--idp-issuer");
    fails_with(&[url, "--dpop", "sometimes"], "--dpop");
    fails_with(
        &[url, "--max-credential-file", "0"],
        "--max-credential-file",
    );
}
