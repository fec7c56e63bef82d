//! The evaluation cost bound: a rule whose comprehensions could visit more than
//! `--policy-max-steps` items is refused at load, and a request that brings the rules
//! more than `--policy-max-items` values is refused before any rule runs, so the worst
//! case reckoned at load holds.

use serde_json::json;

use super::*;

fn with(max_items: usize, max_steps: u64) -> Limits {
    Limits {
        max_items,
        max_steps,
        ..Limits::default()
    }
}

#[test]
fn a_rule_that_could_visit_too_many_items_is_refused_at_load_saying_what_works() {
    let nested = "arguments.xs.all(x, arguments.ys.exists(y, y == x))";
    let rules = || vec![spec("pairs", Phase::Call, Effect::Allow, nested)];
    let why = Policy::new(rules(), &Limits::default()).unwrap_err();
    assert!(
        why.contains("rule \"pairs\"")
            && why.contains("1001000")
            && why.contains("--policy-max-steps")
            && why.contains("--policy-max-items"),
        "{why}"
    );
    // Fewer items per list, or more steps: accepted.
    assert!(Policy::new(rules(), &with(300, 100_000)).is_ok());
    assert!(Policy::new(rules(), &with(1000, 2_000_000)).is_ok());
    // A list written in the rule counts as written.
    let written = "arguments.paths.all(p, ['/srv', '/tmp'].exists(a, p.startsWith(a)))";
    assert!(
        Policy::new(
            vec![spec("paths", Phase::Call, Effect::Allow, written)],
            &Limits::default()
        )
        .is_ok()
    );
}

#[test]
fn arguments_past_the_item_bound_are_refused_before_any_rule_runs() {
    let policy = policy(vec![
        spec(
            "all-positive",
            Phase::Call,
            Effect::Require,
            "!has(arguments.xs) || arguments.xs.all(x, x > 0)",
        ),
        spec("everyone", Phase::Call, Effect::Allow, "true"),
    ]);
    let mut request = Request::call("sum");
    let at_bound: Vec<i64> = (1..=1000).collect();
    request.arguments = Some(json!({"xs": at_bound}));
    assert_eq!(
        policy.call(&request.input()),
        Decision::Allow,
        "the channel is alive at the bound"
    );
    let past: Vec<i64> = (1..=1001).collect();
    request.arguments = Some(json!({"xs": past}));
    let (rule, why) = refused(policy.call(&request.input()));
    assert_eq!(rule, "default");
    assert!(why.contains("--policy-max-items (1000)"), "{why}");
    // Nested values count too: 10 lists of 100.
    let nested: Vec<Vec<i64>> = (0..10).map(|_| (1..=100).collect()).collect();
    request.arguments = Some(json!({"xs": nested}));
    assert!(
        refused(policy.call(&request.input()))
            .1
            .contains("--policy-max-items")
    );
}

#[test]
fn only_the_arguments_a_rule_reads_are_held_to_the_bound() {
    let policy = policy(vec![spec(
        "short-text",
        Phase::Call,
        Effect::Allow,
        "!has(arguments.text) || size(arguments.text) < 100",
    )]);
    let mut request = Request::call("write");
    let huge: Vec<i64> = (0..100_000).collect();
    request.arguments = Some(json!({"text": "hello", "rows": huge}));
    assert_eq!(policy.call(&request.input()), Decision::Allow);
}

#[test]
fn a_caller_with_more_claims_than_the_bound_is_refused_not_judged_slowly() {
    let policy = policy(vec![spec(
        "staff",
        Phase::Call,
        Effect::Allow,
        "principal.claims.roles.exists(r, r == 'staff')",
    )]);
    let mut request = Request::call("write");
    let roles: Vec<String> = (0..2000).map(|n| format!("role-{n}")).collect();
    request.principal = Principal::new(
        Some("eve".into()),
        json!({"roles": roles}),
        Vec::new(),
        None,
        Vec::new(),
    );
    let (rule, why) = refused(policy.call(&request.input()));
    assert_eq!(rule, "default");
    assert!(
        why.contains("the caller's claims hold 2001 values") && why.contains("--policy-max-items"),
        "{why}"
    );
    // A policy that never reads the claims judges the same caller.
    let by_tool = super::policy(vec![spec(
        "writes",
        Phase::Call,
        Effect::Allow,
        "tool.name == 'write'",
    )]);
    assert_eq!(by_tool.call(&request.input()), Decision::Allow);
    request.principal = Principal::new(
        Some("ada".into()),
        json!({"roles": ["staff"]}),
        Vec::new(),
        None,
        Vec::new(),
    );
    assert_eq!(
        policy.call(&request.input()),
        Decision::Allow,
        "the channel is alive"
    );
}
