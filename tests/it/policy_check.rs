//! `mcp-stdio policy check`: a policy file's decision for one request, offline, with every
//! rule's verdict; exit 0 allowed, 1 hidden or refused, 2 a bad file or flag (nothing on
//! stdout then).

use crate::common::run_to_end;

const POLICY: &str = r#"
[[rules]]
name = "no-admin-tools"
phase = "list"
effect = "deny"
when = "tool.name.startsWith('admin_') && !('admins' in principal.groups)"

[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "true"

[[rules]]
name = "contractors-read-only"
phase = "call"
effect = "deny"
when = "has(principal.claims.kind) && principal.claims.kind == 'contractor' && !tool.annotations.readOnlyHint"
message = "contractors may only use read-only tools"

[[rules]]
name = "tmp-only"
phase = "call"
effect = "require"
when = "!has(arguments.path) || arguments.path.startsWith('/tmp/')"

[[rules]]
name = "signed-in"
phase = "call"
effect = "allow"
when = "principal.authenticated"
"#;

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.toml"), POLICY).unwrap();
        // A token's claims as they are, and the gateway's own shape.
        std::fs::write(
            dir.path().join("bob.json"),
            r#"{"sub": "bob", "kind": "contractor", "scope": "mcp:tools"}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("ada.json"),
            r#"{"sub": "ada", "claims": {"kind": "employee"}, "groups": ["admins"]}"#,
        )
        .unwrap();
        Files { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn check(&self, args: &[&str]) -> (i32, String, String) {
        let policy = self.path("policy.toml");
        let mut all = vec!["policy", "check", policy.as_str()];
        all.extend_from_slice(args);
        run_to_end(&all)
    }
}

#[test]
fn each_decision_is_explained_rule_by_rule_with_its_exit_code() {
    let files = Files::new();
    let (bob, ada) = (files.path("bob.json"), files.path("ada.json"));
    let (code, out, _) = files.check(&["--as", &bob, "--call", "write_file"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("call deny    contractors-read-only    holds"),
        "{out}"
    );
    assert!(
        out.contains("decision: refused by rule \"contractors-read-only\": contractors may only use read-only tools"),
        "{out}"
    );
    let (code, out, _) = files.check(&[
        "--as",
        &bob,
        "--call",
        "read_file",
        "--annotations",
        r#"{"readOnlyHint": true}"#,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("decision: allowed\n"), "{out}");
    let (code, out, _) = files.check(&[
        "--as",
        &ada,
        "--call",
        "write_file",
        "--arguments",
        r#"{"path": "/etc/passwd"}"#,
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("refused by rule \"tmp-only\""), "{out}");
    let (code, out, _) = files.check(&["--as", &bob, "--call", "admin_reset", "--list"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("decision: hidden (rule \"no-admin-tools\")"),
        "{out}"
    );
    assert!(
        !out.contains("call "),
        "--list asks only the list phase: {out}"
    );
    let (code, out, _) = files.check(&["--as", &ada, "--call", "admin_reset"]);
    assert_eq!(code, 0, "{out}");
    // No --as: an anonymous caller, whom the allow rule does not let in.
    let (code, out, _) = files.check(&["--read", "file:///tmp/a"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("as an anonymous caller") && out.contains("refused by rule \"default\""),
        "{out}"
    );
}

#[test]
fn a_bad_policy_or_flag_is_a_usage_error_that_names_it() {
    let files = Files::new();
    std::fs::write(
        files.path("broken.toml"),
        "[[rules]]\nname = \"r\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"user.name == 'x'\"\n",
    )
    .unwrap();
    let broken = files.path("broken.toml");
    for (args, needle) in [
        (
            vec!["policy", "check", broken.as_str(), "--call", "x"],
            "unknown variable `user`",
        ),
        (
            vec!["policy", "check", "/nonexistent/p.toml", "--call", "x"],
            "cannot read",
        ),
    ] {
        let (code, out, err) = run_to_end(&args);
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty());
        assert!(err.contains(needle), "{err}");
    }
    let (code, out, err) = files.check(&["--call", "x", "--arguments", "[1]"]);
    assert_eq!(code, 2);
    assert!(
        out.is_empty() && err.contains("--arguments must be a JSON object"),
        "{err}"
    );
    // The bounds are flags: this condition nests 2 levels.
    let deep = files.dir.path().join("deep.toml");
    std::fs::write(
        &deep,
        "[[rules]]\nname = \"deep\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"((true))\"\n",
    )
    .unwrap();
    let deep = deep.to_str().unwrap();
    let (code, _, _) = run_to_end(&["policy", "check", deep, "--call", "x"]);
    assert_eq!(code, 0, "within the default nesting");
    let (code, out, err) = run_to_end(&[
        "policy",
        "check",
        deep,
        "--call",
        "x",
        "--policy-max-nesting",
        "1",
    ]);
    assert_eq!(code, 2);
    assert!(
        out.is_empty() && err.contains("nests 2 levels deep, more than --policy-max-nesting (1)"),
        "{err}"
    );
    let (code, _, err) = files.check(&["--call", "x", "--policy-max-rules", "4"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("5 rules, more than --policy-max-rules (4)"),
        "{err}"
    );
    // The memo's bound: any size from none to 100000 shapes per principal.
    let (code, _, _) = files.check(&["--call", "x", "--policy-memo", "0"]);
    assert_ne!(
        code, 2,
        "--policy-memo 0 (evaluate every rule every time) is accepted"
    );
    let (code, out, err) = files.check(&["--call", "x", "--policy-memo", "100001"]);
    assert_eq!(code, 2);
    assert!(
        out.is_empty() && err.contains("--policy-memo") && err.contains("0..=100000"),
        "{err}"
    );
    let (code, _, err) = files.check(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("--call"), "{err}");
}

#[test]
fn a_rule_that_could_cost_too_much_is_refused_and_arguments_past_the_item_bound_are_too() {
    let files = Files::new();
    let nested = files.path("nested.toml");
    std::fs::write(
        &nested,
        "[[rules]]\nname = \"pairs\"\nphase = \"call\"\neffect = \"allow\"\nwhen = \"arguments.xs.all(x, arguments.ys.exists(y, y == x))\"\n",
    )
    .unwrap();
    let (code, out, err) = run_to_end(&["policy", "check", &nested, "--call", "x"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        out.is_empty() && err.contains("--policy-max-steps (100000)"),
        "{err}"
    );
    // Within a smaller item bound it loads, and a call within it is judged.
    let small = ["--policy-max-items", "10"];
    let mut args = vec!["policy", "check", &nested, "--call", "x"];
    args.extend(small);
    args.extend(["--arguments", r#"{"xs": [1, 2], "ys": [2, 1]}"#]);
    let (code, out, err) = run_to_end(&args);
    assert_eq!(code, 0, "{out}{err}");
    // Past it, refused before any rule runs, the flag named.
    args.pop();
    args.push(r#"{"xs": [1, 2, 3, 4, 5, 6], "ys": [1, 2, 3, 4, 5, 6]}"#);
    let (code, out, _) = run_to_end(&args);
    assert_eq!(code, 1);
    assert!(out.contains("--policy-max-items (10)"), "{out}");
}
