//! The policy's order, its variables, hidden versus refused, and the attack corpus: rules
//! that try to loop, huge or deep expressions, claims of unexpected types, a principal
//! without claims, and names a rule may not use.

use serde_json::{Value, json};

use super::*;

mod cost;
mod memo;
mod names;

fn spec(name: &str, phase: Phase, effect: Effect, when: &str) -> RuleSpec {
    RuleSpec::new(name, phase, effect, when)
}

fn policy(specs: Vec<RuleSpec>) -> Policy {
    Policy::new(specs, &Limits::default()).unwrap()
}

fn refused_at_load(specs: Vec<RuleSpec>, needle: &str) {
    let error = Policy::new(specs, &Limits::default()).unwrap_err();
    assert!(error.contains(needle), "expected {needle:?} in {error}");
}

struct Request {
    principal: Principal,
    client: Client,
    method: &'static str,
    tool: &'static str,
    annotations: Option<Value>,
    arguments: Option<Value>,
}

impl Request {
    fn call(tool: &'static str) -> Self {
        Request {
            principal: Principal::new(
                Some("ada".into()),
                json!({"department": "eng", "groups": ["staff"]}),
                vec!["mcp:tools".into()],
                None,
                vec!["staff".into()],
            ),
            client: Client {
                name: "claude-code".into(),
                version: "2.1".into(),
                era: "handshake".into(),
            },
            method: "tools/call",
            tool,
            annotations: None,
            arguments: None,
        }
    }

    fn input(&self) -> Input<'_> {
        Input {
            principal: &self.principal,
            server: "files",
            endpoint: "/mcp",
            method: self.method,
            target: Target::Tool {
                name: self.tool,
                annotations: self.annotations.as_ref(),
            },
            arguments: self.arguments.as_ref(),
            client: &self.client,
        }
    }
}

fn refused(decision: Decision) -> (String, String) {
    match decision {
        Decision::Refused { rule, why } => (rule, why),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn no_rules_allow_everything_and_a_phase_without_rules_allows_its_part() {
    let request = Request::call("write");
    assert_eq!(Policy::open().call(&request.input()), Decision::Allow);
    let only_calls = policy(vec![spec(
        "eng",
        Phase::Call,
        Effect::Allow,
        "principal.claims.department == 'eng'",
    )]);
    assert_eq!(only_calls.visible(&request.input()), Decision::Allow);
    assert_eq!(only_calls.call(&request.input()), Decision::Allow);
}

#[test]
fn deny_wins_every_require_must_hold_then_an_allow_and_else_the_default_refuses() {
    let request = Request::call("write");
    let rules = |extra: Vec<RuleSpec>| {
        let mut all = vec![spec("everyone", Phase::Call, Effect::Allow, "true")];
        all.extend(extra);
        policy(all)
    };
    let denied = rules(vec![spec(
        "no-write",
        Phase::Call,
        Effect::Deny,
        "tool.name == 'write'",
    )]);
    assert_eq!(refused(denied.call(&request.input())).0, "no-write");
    let required = rules(vec![spec(
        "scoped",
        Phase::Call,
        Effect::Require,
        "'mcp:admin' in principal.scopes",
    )]);
    let (rule, why) = refused(required.call(&request.input()));
    assert_eq!(rule, "scoped");
    assert!(why.contains("requirement does not hold"), "{why}");
    let met = rules(vec![spec(
        "scoped",
        Phase::Call,
        Effect::Require,
        "'mcp:tools' in principal.scopes",
    )]);
    assert_eq!(met.call(&request.input()), Decision::Allow);
    let nobody = policy(vec![spec(
        "admins",
        Phase::Call,
        Effect::Allow,
        "'admins' in principal.groups",
    )]);
    let (rule, why) = refused(nobody.call(&request.input()));
    assert_eq!(rule, "default");
    assert!(why.contains("no allow rule of the call phase"), "{why}");
    let deny_only = policy(vec![spec(
        "no-write",
        Phase::Call,
        Effect::Deny,
        "tool.name == 'write'",
    )]);
    assert_eq!(
        refused(deny_only.call(&Request::call("read").input())).0,
        "default"
    );
    assert!(
        deny_only.warnings()[0].contains("no allow rule"),
        "{:?}",
        deny_only.warnings()
    );
    assert!(denied.warnings().is_empty());
}

#[test]
fn every_variable_reaches_the_rules() {
    let mut request = Request::call("write");
    request.annotations = Some(json!({"destructiveHint": false, "readOnlyHint": true}));
    request.arguments = Some(json!({"path": "/tmp/notes.txt", "count": 3}));
    let holds = |when: &str, request: &Request| {
        let p = policy(vec![spec("only", Phase::Call, Effect::Allow, when)]);
        p.call(&request.input()) == Decision::Allow
    };
    for when in [
        "principal.sub == 'ada' && principal.authenticated",
        "principal.claims.department == 'eng'",
        "'staff' in principal.groups && 'mcp:tools' in principal.scopes",
        "server == 'files' && endpoint == '/mcp'",
        "method == 'tools/call'",
        "tool.name == 'write' && tool.annotations.readOnlyHint && !tool.annotations.destructiveHint",
        "tool.annotations.openWorldHint",
        "arguments.path.startsWith('/tmp/') && arguments.count < 5",
        "client.name == 'claude-code' && client.era == 'handshake'",
        "resource.uri == '' && prompt.name == ''",
    ] {
        assert!(holds(when, &request), "{when}");
    }
    assert!(!holds("arguments.path.startsWith('/etc/')", &request));
    // A resource and a prompt.
    let principal = Principal::default();
    let client = Client::default();
    let read = Input {
        principal: &principal,
        server: "files",
        endpoint: "/mcp",
        method: "resources/read",
        target: Target::Resource {
            uri: "file:///public/a.txt",
        },
        arguments: None,
        client: &client,
    };
    let p = policy(vec![spec(
        "public",
        Phase::Call,
        Effect::Allow,
        "resource.uri.startsWith('file:///public/') && !tool.annotations.destructiveHint",
    )]);
    assert_eq!(p.call(&read), Decision::Allow);
    let prompt = Input {
        target: Target::Prompt { name: "summary" },
        method: "prompts/get",
        ..read
    };
    let p = policy(vec![spec(
        "summary",
        Phase::Call,
        Effect::Allow,
        "prompt.name == 'summary' && !principal.authenticated",
    )]);
    assert_eq!(p.call(&prompt), Decision::Allow);
}

#[test]
fn what_a_list_hides_is_hidden_when_called_and_a_call_rule_refusal_says_why() {
    let p = policy(vec![
        RuleSpec {
            message: Some("paths outside /tmp are not for agents".into()),
            ..spec(
                "tmp-only",
                Phase::Call,
                Effect::Deny,
                "!arguments.path.startsWith('/tmp/')",
            )
        },
        spec("calls", Phase::Call, Effect::Allow, "true"),
        spec(
            "no-admin-tools",
            Phase::List,
            Effect::Deny,
            "tool.name.startsWith('admin_')",
        ),
        spec("lists", Phase::List, Effect::Allow, "true"),
    ]);
    let hidden = Request::call("admin_reset");
    assert_eq!(
        p.visible(&hidden.input()),
        Decision::Hidden {
            rule: "no-admin-tools".into()
        }
    );
    assert_eq!(
        p.call(&hidden.input()),
        Decision::Hidden {
            rule: "no-admin-tools".into()
        }
    );
    let mut outside = Request::call("write");
    outside.arguments = Some(json!({"path": "/etc/passwd"}));
    assert_eq!(p.visible(&outside.input()), Decision::Allow);
    assert_eq!(
        refused(p.call(&outside.input())),
        (
            "tmp-only".into(),
            "paths outside /tmp are not for agents".into()
        )
    );
    outside.arguments = Some(json!({"path": "/tmp/x"}));
    assert_eq!(p.call(&outside.input()), Decision::Allow);
}

#[test]
fn a_condition_that_cannot_be_evaluated_never_lets_anything_through() {
    // A principal without claims; a claim of another type than the rule expects.
    let mut request = Request::call("write");
    request.principal = Principal::new(
        Some("ada".into()),
        json!({"groups": "admins"}),
        Vec::new(),
        None,
        Vec::new(),
    );
    let deny = policy(vec![
        RuleSpec {
            message: Some("contractors may not".into()),
            ..spec(
                "no-contractors",
                Phase::Call,
                Effect::Deny,
                "principal.claims.kind == 'contractor'",
            )
        },
        spec("all", Phase::Call, Effect::Allow, "true"),
    ]);
    let (rule, why) = refused(deny.call(&request.input()));
    assert_eq!(rule, "no-contractors");
    // Not the rule's own message: it did not hold, it could not be evaluated.
    assert!(
        why.contains("could not be evaluated") && !why.contains("contractors may not"),
        "{why}"
    );
    let typed = policy(vec![spec(
        "admins",
        Phase::Call,
        Effect::Allow,
        "principal.claims.groups.exists(g, g == 'admins')",
    )]);
    assert_eq!(refused(typed.call(&request.input())).0, "default");
    let require = policy(vec![
        spec(
            "number",
            Phase::Call,
            Effect::Require,
            "principal.claims.level > 3",
        ),
        spec("all", Phase::Call, Effect::Allow, "true"),
    ]);
    assert_eq!(refused(require.call(&request.input())).0, "number");
    request.principal = Principal::default();
    let anonymous = policy(vec![spec(
        "eng",
        Phase::Call,
        Effect::Allow,
        "principal.claims.department == 'eng'",
    )]);
    assert_eq!(refused(anonymous.call(&request.input())).0, "default");
    // Not a boolean.
    let p = policy(vec![spec("odd", Phase::Call, Effect::Allow, "tool.name")]);
    assert_eq!(refused(p.call(&request.input())).0, "default");
}

#[test]
fn bad_and_hostile_rules_are_refused_at_load_naming_the_rule() {
    let call = |when: &str| vec![spec("r1", Phase::Call, Effect::Allow, when)];
    refused_at_load(call("tool.name =="), "not a CEL expression");
    refused_at_load(call("user.name == 'x'"), "unknown variable `user`");
    refused_at_load(
        call("tool.name.startswith('a')"),
        "unknown function `startswith`",
    );
    refused_at_load(call(""), "`when` is empty");
    let huge = format!("tool.name == '{}'", "a".repeat(5000));
    refused_at_load(call(&huge), "--policy-max-expression");
    let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
    refused_at_load(call(&deep), "--policy-max-nesting");
    let loops = "[1,2].all(a, [1,2].all(b, [1,2].all(c, [1,2].all(d, [1,2].exists(e, true)))))";
    refused_at_load(call(loops), "--policy-max-comprehensions");
    refused_at_load(
        vec![
            spec("twice", Phase::Call, Effect::Allow, "true"),
            spec("twice", Phase::List, Effect::Allow, "true"),
        ],
        "used twice",
    );
    refused_at_load(
        call("true")
            .into_iter()
            .map(|s| RuleSpec {
                name: "no spaces".into(),
                ..s
            })
            .collect(),
        "a name is",
    );
    let many: Vec<RuleSpec> = (0..1001)
        .map(|n| spec(&format!("r{n}"), Phase::Call, Effect::Allow, "true"))
        .collect();
    refused_at_load(many, "--policy-max-rules");
    // Every problem is reported at once.
    let both = Policy::new(
        vec![
            spec("a", Phase::Call, Effect::Allow, "nope == 1"),
            spec("b", Phase::Call, Effect::Allow, "("),
        ],
        &Limits::default(),
    )
    .unwrap_err();
    assert!(
        both.contains("rule \"a\"") && both.contains("rule \"b\""),
        "{both}"
    );
}

#[test]
fn a_condition_at_the_nesting_bound_evaluates_on_a_small_stack() {
    let limits = Limits::default();
    let deep = format!(
        "{}tool.name == 'write'{}",
        "(".repeat(limits.max_nesting),
        ")".repeat(limits.max_nesting)
    );
    let p = policy(vec![spec("deep", Phase::Call, Effect::Allow, &deep)]);
    let request = Request::call("write");
    // Test threads have 2 MiB of stack, as tokio's workers do.
    let decided = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || p.call(&request.input()) == Decision::Allow)
        .unwrap()
        .join()
        .unwrap();
    assert!(decided);
    let comprehensions =
        "arguments.paths.all(p, p.startsWith('/tmp/')) && arguments.tags.exists(t, t == 'ok')";
    let p = policy(vec![spec(
        "lists",
        Phase::Call,
        Effect::Allow,
        comprehensions,
    )]);
    let mut request = Request::call("write");
    request.arguments = Some(json!({"paths": ["/tmp/a", "/tmp/b"], "tags": ["ok"]}));
    assert_eq!(p.call(&request.input()), Decision::Allow);
}

#[test]
fn a_policy_file_is_read_with_its_rules() {
    let text = r#"
[[rules]]
name = "read-only-for-contractors"
phase = "call"
effect = "deny"
when = "principal.claims.kind == 'contractor' && !tool.annotations.readOnlyHint"
message = "contractors may only use read-only tools"

[[rules]]
name = "everyone-else"
phase = "call"
effect = "allow"
when = "true"
"#;
    let specs = parse(text).unwrap();
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[0].effect, Effect::Deny);
    assert!(Policy::new(specs, &Limits::default()).is_ok());
    let error = parse(
        "[[rules]]\nname = \"x\"\nphase = \"sometimes\"\neffect = \"allow\"\nwhen = \"true\"\n",
    )
    .unwrap_err();
    assert!(error.contains("not a policy file"), "{error}");
    assert!(parse("[[rule]]\n").unwrap_err().contains("[[rules]]"));
}
