//! The variables a decision adds (`names.rs`): only those some rule can reach, every way of
//! writing a name still reaching it, and of `arguments` only the fields the rules name
//! unless one uses the map itself.

use serde_json::json;

use super::*;

#[test]
fn a_decision_adds_only_reachable_variables_and_every_way_of_writing_a_name_still_reaches_it() {
    // Each rule is a require that holds only if the variable it names was in scope with
    // its value: spaced selections, has(), comprehensions, a call's target, list and map
    // literals, a qualified name's prefix (`tool.annotations`).
    let mut request = Request::call("write");
    request.annotations = Some(json!({"readOnlyHint": true}));
    request.arguments = Some(json!({"path": "/tmp/a", "tags": ["x"]}));
    let holding = [
        "tool . name == 'write'",
        "has(principal.claims.department)",
        "principal.groups.exists(g, g == 'staff')",
        "client.name.startsWith('claude')",
        "[method][0] == 'tools/call'",
        "{'era': client.era}['era'] == 'handshake'",
        "tool.annotations.readOnlyHint && tool.annotations['readOnlyHint']",
        "arguments.tags.all(t, t == 'x') && arguments.path == '/tmp/a'",
        "size(arguments) == 2 && 'tags' in arguments && arguments['path'] == '/tmp/a'",
        "has(arguments.path) && !has(arguments.region)",
        "server == 'files' && endpoint == '/mcp' && client.version == '2.1'",
        "principal.sub == 'ada' && principal.authenticated && 'mcp:tools' in principal.scopes",
    ];
    for (n, when) in holding.iter().enumerate() {
        let alone = policy(vec![
            spec(&format!("r{n}"), Phase::Call, Effect::Require, when),
            spec("rest", Phase::Call, Effect::Allow, "true"),
        ]);
        assert_eq!(alone.call(&request.input()), Decision::Allow, "{when}");
    }
    // The scope holds only what the rules reach: each written name and its prefixes.
    let few = policy(vec![spec(
        "few",
        Phase::Call,
        Effect::Allow,
        "method == 'tools/call' && tool.annotations.readOnlyHint && principal.groups.exists(g, g == 'x')",
    )]);
    // Only the fields of `arguments` the rules name are converted, unless one uses the map
    // itself; either way a rule sees the same values.
    let fields = |when: &str| {
        let reach = policy(vec![spec("a", Phase::Call, Effect::Allow, when)]);
        let names = reach.reachable_names();
        let whole = names.contains(&crate::policy::names::WHOLE_ARGUMENTS);
        let mut fields: Vec<String> = names
            .iter()
            .filter_map(|n| n.strip_prefix("arguments."))
            .filter(|f| !f.contains('.'))
            .map(str::to_owned)
            .collect();
        fields.sort();
        (whole, fields)
    };
    assert_eq!(
        fields("has(arguments.path) && arguments.tags.a.b == 1 && arguments.path.startsWith('/')"),
        (false, vec!["path".to_owned(), "tags".to_owned()])
    );
    for whole in [
        "'path' in arguments",
        "size(arguments) > 0",
        "arguments['path'] == 'x'",
        "[arguments][0].path == 'x'",
    ] {
        assert!(fields(whole).0, "{whole} uses the map itself");
    }
    let path_only = policy(vec![spec(
        "tmp",
        Phase::Call,
        Effect::Allow,
        "arguments.path.startsWith('/tmp/') && !has(arguments.tags)",
    )]);
    request.arguments = Some(json!({"path": "/tmp/a", "big": "x".repeat(100_000)}));
    assert_eq!(path_only.call(&request.input()), Decision::Allow);
    request.arguments = Some(json!({"path": "/tmp/a", "tags": []}));
    assert_eq!(refused(path_only.call(&request.input())).0, "default");
    request.arguments = Some(json!({"other": 1}));
    let (rule, why) = refused(path_only.call(&request.input()));
    assert_eq!(rule, "default");
    assert!(why.contains("no allow rule"), "{why}");
    let mut reached = few.reachable_names();
    reached.retain(|name| *name != "g" && !name.starts_with('@'));
    assert_eq!(
        reached,
        [
            "method",
            "principal",
            "principal.groups",
            "tool",
            "tool.annotations",
            "tool.annotations.readOnlyHint"
        ]
    );
}
