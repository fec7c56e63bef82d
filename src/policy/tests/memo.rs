//! The memo of verdicts (`memo.rs`): a remembered verdict is the one every rule would give,
//! arguments are never remembered, the bound holds, and a reload starts over.

use serde_json::json;

use super::*;

/// Rules of every kind the memo must keep apart: fixed ones (principal, tool, annotations,
/// client, method) and argument ones, in both phases.
fn mixed_policy(memo_entries: usize) -> Policy {
    let limits = Limits {
        memo_entries,
        ..Limits::default()
    };
    Policy::new(
        vec![
            spec(
                "no-admin",
                Phase::List,
                Effect::Deny,
                "tool.name.startsWith('admin_')",
            ),
            spec("list-rest", Phase::List, Effect::Allow, "true"),
            spec(
                "readers",
                Phase::Call,
                Effect::Deny,
                "!tool.annotations.readOnlyHint && client.name == 'reader'",
            ),
            spec(
                "tmp",
                Phase::Call,
                Effect::Require,
                "!has(arguments.path) || arguments.path.startsWith('/tmp/')",
            ),
            spec(
                "claims",
                Phase::Call,
                Effect::Deny,
                "principal.claims.department == 'sales' && method == 'tools/call'",
            ),
            spec(
                "calls",
                Phase::Call,
                Effect::Allow,
                "method == 'tools/call'",
            ),
        ],
        &limits,
    )
    .unwrap()
}

#[test]
fn a_remembered_verdict_is_the_one_every_rule_would_give_and_arguments_are_never_remembered() {
    let remembering = mixed_policy(64);
    let evaluating = mixed_policy(0);
    let mut request = Request::call("write");
    let tools = ["write", "read", "admin_drop"];
    let annotations = [None, Some(json!({"readOnlyHint": true}))];
    let arguments = [
        None,
        Some(json!({"path": "/tmp/a"})),
        Some(json!({"path": "/etc/passwd"})),
    ];
    let clients = ["claude-code", "reader"];
    let methods = ["tools/call", "prompts/get"];
    let mut decisions = 0;
    // Twice over: the first round fills the memo, the second reads it.
    for _round in 0..2 {
        for tool in tools {
            for given in &annotations {
                for args in &arguments {
                    for client in clients {
                        for method in methods {
                            request.tool = tool;
                            request.annotations = given.clone();
                            request.arguments = args.clone();
                            request.client.name = client.into();
                            request.method = method;
                            let fresh = Request {
                                principal: request.principal.clone(),
                                client: request.client.clone(),
                                method,
                                tool,
                                annotations: given.clone(),
                                arguments: args.clone(),
                            };
                            let expected = evaluating.call(&fresh.input());
                            assert_eq!(
                                remembering.call(&request.input()),
                                expected,
                                "{tool} {given:?} {args:?} {client} {method}"
                            );
                            assert_eq!(
                                remembering.visible(&request.input()),
                                evaluating.visible(&fresh.input())
                            );
                            decisions += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(decisions, 2 * 3 * 2 * 3 * 2 * 2);
    // One shape per tool, annotations, client and method: the arguments are not part of it.
    assert_eq!(request.principal.memo().len(), 3 * 2 * 2 * 2);
    // The same shape, other arguments: the argument rule is evaluated again, each time.
    request.tool = "write";
    request.annotations = None;
    request.client.name = "claude-code".into();
    request.method = "tools/call";
    for _ in 0..3 {
        request.arguments = Some(json!({"path": "/tmp/ok"}));
        assert_eq!(remembering.call(&request.input()), Decision::Allow);
        request.arguments = Some(json!({"path": "/root/.ssh/id_ed25519"}));
        assert_eq!(refused(remembering.call(&request.input())).0, "tmp");
    }
    // A principal of another department is its own memo: its claims are seen.
    let mut sales = Request::call("write");
    sales.principal = Principal::new(
        Some("bob".into()),
        json!({"department": "sales"}),
        Vec::new(),
        None,
        Vec::new(),
    );
    assert_eq!(refused(remembering.call(&sales.input())).0, "claims");
    request.arguments = None;
    assert_eq!(remembering.call(&request.input()), Decision::Allow);
}

#[test]
fn the_memo_is_bounded_and_a_long_shape_is_never_remembered() {
    let bounded = mixed_policy(3);
    let mut request = Request::call("t0");
    let names: Vec<String> = (0..10).map(|n| format!("tool-{n}")).collect();
    for name in &names {
        let name: &'static str = Box::leak(name.clone().into_boxed_str());
        request.tool = name;
        assert_eq!(bounded.call(&request.input()), Decision::Allow);
        assert!(request.principal.memo().len() <= 3);
    }
    assert!(request.principal.memo().len() >= 1);
    // A shape longer than the bound on its text is evaluated every time, not kept.
    let held = request.principal.memo().len();
    let long: &'static str = Box::leak("admin_".repeat(100).into_boxed_str());
    request.tool = long;
    for _ in 0..2 {
        assert!(matches!(
            bounded.call(&request.input()),
            Decision::Hidden { rule } if rule == "no-admin"
        ));
    }
    assert_eq!(request.principal.memo().len(), held);
    // --policy-memo 0: nothing remembered at all.
    let none = mixed_policy(0);
    let fresh = Request::call("write");
    assert_eq!(none.call(&fresh.input()), Decision::Allow);
    assert_eq!(fresh.principal.memo().len(), 0);
}

#[test]
fn a_reloaded_policy_never_sees_the_verdicts_of_the_one_before() {
    let allow = policy(vec![spec("all", Phase::Call, Effect::Allow, "true")]);
    let deny = policy(vec![
        spec(
            "no-write",
            Phase::Call,
            Effect::Deny,
            "tool.name == 'write'",
        ),
        spec("all", Phase::Call, Effect::Allow, "true"),
    ]);
    let request = Request::call("write");
    assert_eq!(allow.call(&request.input()), Decision::Allow);
    assert_eq!(request.principal.memo().len(), 1);
    assert_eq!(refused(deny.call(&request.input())).0, "no-write");
    assert_eq!(allow.call(&request.input()), Decision::Allow);
    // A tool whose annotations changed is another shape.
    let readers = policy(vec![
        spec(
            "writes",
            Phase::Call,
            Effect::Deny,
            "!tool.annotations.readOnlyHint",
        ),
        spec("all", Phase::Call, Effect::Allow, "true"),
    ]);
    let mut changing = Request::call("report");
    changing.annotations = Some(json!({"readOnlyHint": true}));
    assert_eq!(readers.call(&changing.input()), Decision::Allow);
    changing.annotations = Some(json!({"readOnlyHint": false}));
    assert_eq!(refused(readers.call(&changing.input())).0, "writes");
}
