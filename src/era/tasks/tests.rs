//! The translation table both ways, with the shapes the SDKs send (the TypeScript SDK v1's
//! 2025-11-25 tasks, the extension's schemas in `@modelcontextprotocol/ext-tasks` 0.2.2).

use serde_json::json;

use super::*;

/// A task as the TypeScript SDK v1 (server-everything's `simulate-research-query`) makes it.
fn legacy_task(status: &str) -> Value {
    json!({"taskId": "child-7", "status": status, "statusMessage": "Researching...",
           "createdAt": "2026-12-06T10:00:00.000Z", "lastUpdatedAt": "2026-12-06T10:00:01.000Z",
           "ttl": 300000, "pollInterval": 1000})
}

#[test]
fn a_nested_create_task_result_becomes_the_flat_one_under_the_gateways_id() {
    let flat = create_result_to_modern(&json!({"task": legacy_task("working")}), "gw-1").unwrap();
    assert_eq!(
        flat,
        json!({"taskId": "gw-1", "status": "working", "statusMessage": "Researching...",
               "createdAt": "2026-12-06T10:00:00.000Z", "lastUpdatedAt": "2026-12-06T10:00:01.000Z",
               "ttlMs": 300000, "pollIntervalMs": 1000, "resultType": "task"})
    );
    // No ttl (or a null one) is unlimited: `ttlMs` is there, null; no poll interval, none.
    let bare = json!({"task": {"taskId": "c", "status": "working", "createdAt": "x", "lastUpdatedAt": "x", "ttl": null}});
    let flat = create_result_to_modern(&bare, "gw-2").unwrap();
    assert_eq!(flat["ttlMs"], Value::Null);
    assert!(flat.get("pollIntervalMs").is_none() && flat.get("ttl").is_none());
    assert_eq!(
        create_result_to_modern(&json!({"content": []}), "gw-3"),
        None
    );
}

#[test]
fn the_flat_create_task_result_becomes_the_nested_one_and_back() {
    let flat = create_result_to_modern(&json!({"task": legacy_task("working")}), "gw-1").unwrap();
    let nested = create_result_to_legacy(&flat).unwrap();
    let mut expected = legacy_task("working");
    expected["taskId"] = json!("gw-1");
    assert_eq!(nested, json!({"task": expected}));
    assert_eq!(
        create_result_to_legacy(&json!({"resultType": "complete"})),
        None
    );
    let unlimited = create_result_to_legacy(&json!({"resultType": "task", "taskId": "t",
        "status": "working", "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": null}))
    .unwrap();
    assert_eq!(
        unlimited["task"]["ttl"],
        Value::Null,
        "2025-11-25 requires the key"
    );
}

#[test]
fn tasks_get_inlines_what_the_status_calls_for_and_nothing_else() {
    let result = json!({"content": [{"type": "text", "text": "done"}],
                        "_meta": {RELATED_TASK: {"taskId": "child-7"}}});
    let completed = detailed_task(&legacy_task("completed"), "gw-1", Some(&result), None, None);
    assert_eq!(
        completed["result"],
        json!({"content": [{"type": "text", "text": "done"}], "resultType": "complete"}),
        "the inlined result is a 2026-07-28 CallToolResult, which needs its resultType"
    );
    assert_eq!(completed["resultType"], "complete");
    assert!(completed.get("error").is_none() && completed.get("inputRequests").is_none());
    let error = json!({"code": -32603, "message": "boom"});
    let failed = detailed_task(
        &legacy_task("failed"),
        "gw-1",
        Some(&result),
        Some(&error),
        None,
    );
    assert_eq!(failed["error"], error);
    assert!(failed.get("result").is_none());
    let mut asked = Map::new();
    asked.insert(
        "q-1".into(),
        json!({"method": "elicitation/create", "params": {}}),
    );
    let waiting = detailed_task(
        &legacy_task("input_required"),
        "gw-1",
        None,
        None,
        Some(&asked),
    );
    assert_eq!(
        waiting["inputRequests"]["q-1"]["method"],
        "elicitation/create"
    );
    let working = detailed_task(
        &legacy_task("working"),
        "gw-1",
        Some(&result),
        None,
        Some(&asked),
    );
    for key in ["result", "error", "inputRequests"] {
        assert!(
            working.get(key).is_none(),
            "{key} on a working task: {working}"
        );
    }
    // A 2026-07-28 answer reads back as the 2025-11-25 Task, without the inlined parts.
    let back = task_to_legacy(&completed);
    assert!(back.get("result").is_none() && back.get("resultType").is_none());
    assert_eq!(back["ttl"], 300000);
}

#[test]
fn a_call_becomes_a_task_only_where_the_tool_allows_and_the_client_opted_in() {
    use CallPlan::*;
    use TaskSupport::*;
    let table = [
        (Forbidden, false, Plain),
        (Forbidden, true, Plain),
        (Optional, false, Plain),
        (Optional, true, AsTask),
        (Required, false, MissingCapability),
        (Required, true, AsTask),
    ];
    for (support, opted, plan) in table {
        assert_eq!(plan_call(support, opted), plan, "{support:?} {opted}");
    }
    let tool = |support: &str| json!({"name": "t", "execution": {"taskSupport": support}});
    assert_eq!(TaskSupport::of_tool(&tool("required")), Required);
    assert_eq!(TaskSupport::of_tool(&tool("optional")), Optional);
    assert_eq!(TaskSupport::of_tool(&tool("sometimes")), Forbidden);
    assert_eq!(TaskSupport::of_tool(&json!({"name": "t"})), Forbidden);
    assert!(opted_in(&json!({"extensions": {EXTENSION: {}}})));
    assert!(!opted_in(&json!({"extensions": {}})) && !opted_in(&Value::Null));
    assert_eq!(
        missing_capability_data()["requiredCapabilities"]["extensions"][EXTENSION],
        json!({})
    );
}

#[test]
fn the_extension_is_declared_over_whatever_is_in_the_way_and_read_back() {
    let mut caps = json!({"tools": {}, "extensions": {"other/ext": {}}});
    assert!(!offers_extension(&caps));
    declare_extension(&mut caps);
    assert!(offers_extension(&caps) && opted_in(&caps));
    assert_eq!(caps["extensions"]["other/ext"], json!({}), "others kept");
    for mut odd in [
        json!({"extensions": true}),
        json!({"extensions": []}),
        json!(null),
        json!(7),
    ] {
        declare_extension(&mut odd);
        assert_eq!(odd["extensions"], json!({EXTENSION: {}}), "{odd}");
    }
}

#[test]
fn related_task_meta_is_read_added_and_removed() {
    let tied = tied_to(&json!({"message": "Which?"}), "child-7");
    assert_eq!(related_task(&tied), Some("child-7"));
    assert_eq!(tied["message"], "Which?");
    assert_eq!(related_task(&json!({"message": "x"})), None);
    let kept = without_related_task(
        &json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "c"}, "k": 1}}),
    );
    assert_eq!(kept["_meta"], json!({"k": 1}));
    let bare =
        without_related_task(&json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "c"}}}));
    assert!(bare.get("_meta").is_none());
    assert!(is_terminal("cancelled") && !is_terminal("input_required"));
}

#[test]
fn a_handshake_era_servers_hidden_tasks_are_refused_in_the_ladders_order() {
    let opted = json!({"extensions": {EXTENSION: {}}});
    assert_eq!(hidden_tasks_refusal("tasks/list", &opted).0, -32601);
    assert_eq!(hidden_tasks_refusal("tasks/result", &opted).0, -32601);
    let (code, _, data) = hidden_tasks_refusal("tasks/get", &json!({}));
    assert_eq!((code, data), (-32021, Some(missing_capability_data())));
    let (code, message, _) = hidden_tasks_refusal("tasks/cancel", &opted);
    assert_eq!((code, message.as_str()), (-32602, UNKNOWN_TASK));
}
