use std::sync::Weak;

use super::*;

fn new_task(principal: &str, ttl: Duration) -> NewTask {
    NewTask {
        principal: Some(principal.into()),
        child_id: "child-1".into(),
        backend: Weak::new(),
        ttl,
    }
}

fn finish_and_read(task: &Task) {
    task.settle(Outcome::Result(serde_json::json!({"content": []})));
    task.progress.lock().unwrap().delivered = true;
}

#[tokio::test]
async fn a_task_is_its_principals_alone() {
    let tasks = Tasks::new(4, 32, None);
    let task = tasks
        .insert(new_task("alice", Duration::from_secs(60)))
        .unwrap();
    assert!(
        task.id.starts_with("task-") && task.id.len() > 30,
        "{}",
        task.id
    );
    assert!(tasks.get(&task.id, Some("alice")).is_some());
    assert!(
        tasks.get(&task.id, Some("bob")).is_none(),
        "another principal's task is unknown"
    );
    assert!(tasks.get(&task.id, None).is_none());
    assert!(tasks.get("task-guessed", Some("alice")).is_none());
}

#[tokio::test]
async fn the_bound_refuses_until_a_finished_and_read_task_makes_room() {
    let tasks = Tasks::new(2, 32, None);
    let first = tasks
        .insert(new_task("alice", Duration::from_secs(60)))
        .unwrap();
    let second = tasks
        .insert(new_task("alice", Duration::from_secs(60)))
        .unwrap();
    assert_eq!(tasks.room_for(Some("alice")), Err(Full::Principal(2)));
    assert!(
        matches!(
            tasks.insert(new_task("alice", Duration::from_secs(60))),
            Err(Full::Principal(2))
        ),
        "the insertion checks too"
    );
    assert_eq!(
        tasks.room_for(Some("bob")),
        Ok(()),
        "the bound is per principal"
    );
    // Finished but not yet read: still held, still counted.
    first.settle(Outcome::Result(serde_json::json!({})));
    assert_eq!(tasks.room_for(Some("alice")), Err(Full::Principal(2)));
    finish_and_read(&first);
    assert_eq!(tasks.room_for(Some("alice")), Ok(()));
    assert!(first.dropped.is_cancelled(), "the read task made room");
    assert!(tasks.get(&first.id, Some("alice")).is_none());
    assert!(
        tasks.get(&second.id, Some("alice")).is_some(),
        "the running one is kept"
    );
}

#[tokio::test]
async fn a_task_is_dropped_when_its_ttl_is_up_and_not_before() {
    let tasks = Tasks::new(4, 32, None);
    let started = std::time::Instant::now();
    let task = tasks
        .insert(new_task("alice", Duration::from_millis(200)))
        .unwrap();
    assert_eq!(task.ttl_ms, 200);
    let deadline = started + Duration::from_secs(10);
    while tasks.get(&task.id, Some("alice")).is_some() {
        assert!(std::time::Instant::now() < deadline, "never dropped");
        tokio::task::yield_now().await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "kept for its whole ttl"
    );
    assert!(task.dropped.is_cancelled());
}

#[tokio::test]
async fn an_outcome_is_awaited_and_set_once() {
    let tasks = Tasks::new(4, 32, None);
    let task = tasks
        .insert(new_task("alice", Duration::from_secs(60)))
        .unwrap();
    assert!(
        task.outcome_within(Duration::from_millis(10))
            .await
            .is_none()
    );
    let waiting = {
        let task = task.clone();
        tokio::spawn(async move { task.outcome_within(Duration::from_secs(10)).await })
    };
    task.progress.lock().unwrap().questions.insert(
        "elicitation-1".into(),
        Question {
            asker_raw_id: "1".into(),
            method: "elicitation/create".into(),
            params: serde_json::json!({}),
        },
    );
    task.settle(Outcome::Error(serde_json::json!({"code": -1})));
    task.settle(Outcome::Result(serde_json::json!({})));
    assert!(
        matches!(waiting.await.unwrap(), Some(Outcome::Error(_))),
        "the first outcome stands"
    );
    assert!(
        task.progress.lock().unwrap().questions.is_empty(),
        "an ended task asks nothing"
    );
}

#[tokio::test]
async fn among_replicas_a_task_id_names_its_owner_and_nothing_else_does() {
    let key = crate::cluster_key::ClusterKey::random();
    let sealing = || Sealing {
        sealer: key.sealer("task-id"),
        owner: "https://a.example".into(),
    };
    let tasks = Tasks::new(4, 32, Some(sealing()));
    let task = tasks
        .insert(new_task("alice", Duration::from_secs(60)))
        .unwrap();
    assert!(
        !task.id.contains("a.example"),
        "the owner is sealed, not shown"
    );
    assert_eq!(tasks.owner(&task.id).as_deref(), Some("https://a.example"));
    let other = Tasks::new(
        4,
        32,
        Some(Sealing {
            sealer: crate::cluster_key::ClusterKey::random().sealer("task-id"),
            owner: "x".into(),
        }),
    );
    assert_eq!(
        other.owner(&task.id),
        None,
        "another cluster's key opens nothing"
    );
    let state_sealer = Tasks::new(
        4,
        32,
        Some(Sealing {
            sealer: key.sealer("request-state"),
            owner: "x".into(),
        }),
    );
    assert_eq!(
        state_sealer.owner(&task.id),
        None,
        "a task id is not a requestState"
    );
    assert_eq!(Tasks::new(4, 32, None).owner(&task.id), None);
}
