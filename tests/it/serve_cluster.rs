//! `serve` as replicas (`--cluster-key-file`, `--advertise-url`): a session follows its
//! owner from whichever replica a request lands on (POST, the GET stream with
//! `Last-Event-ID`, DELETE), a parked round's retry goes to where the call waits, forged
//! ids and forged replica headers are refused, a gone owner means 404, forwarding is
//! bounded, and a replica drains on SIGTERM.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::eventually;
use crate::common::modern::CLIENT_CAPABILITIES;
use crate::common::serve::{DEADLINE, Serve, fixture, read_until, wait_dead};
use mcp_stdio::serve::cluster::Bound;

const KEY: &str = "a-cluster-key-of-more-than-thirty-two-bytes-for-tests";
const OTHER_KEY: &str = "another-cluster-key-longer-than-thirty-two-bytes-xyz";

/// A key file (mode 600) in its own directory.
fn key_file(key: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.key");
    std::fs::write(&path, format!("{key}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (dir, path.to_string_lossy().into_owned())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One replica on a port of its own, advertising itself at that port.
async fn replica(key_path: &str, extra: &[&str]) -> Serve {
    replica_with(key_path, extra, &[]).await
}

/// [`replica`] with the fixture's environment `env`.
async fn replica_with(key_path: &str, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    let port = free_port().to_string();
    let advertise = format!("http://127.0.0.1:{port}");
    let mut flags = vec![
        "--port",
        &port,
        "--cluster-key-file",
        key_path,
        "--advertise-url",
        &advertise,
    ];
    flags.extend_from_slice(extra);
    let fixture = fixture();
    Serve::start_with(&flags, &[fixture.as_str()], env).await
}

struct Cluster {
    _dir: tempfile::TempDir,
    replicas: Vec<Serve>,
}

impl Cluster {
    async fn start(n: usize, extra: &[&str]) -> Self {
        let (dir, key_path) = key_file(KEY);
        let mut replicas = Vec::new();
        for _ in 0..n {
            replicas.push(replica(&key_path, extra).await);
        }
        Cluster {
            _dir: dir,
            replicas,
        }
    }
}

fn text(answer: &crate::common::serve::Answer) -> String {
    answer.json()["result"]["content"][0]["text"]
        .as_str()
        .map_or_else(|| answer.body.clone(), str::to_owned)
}

async fn metric(serve: &Serve, line: &str) -> u64 {
    let metrics = serve.send("GET", "/metrics", &[], "").await.body;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_session_follows_its_owner_from_whichever_replica_a_request_lands_on() {
    let cluster = Cluster::start(3, &["--keepalive", "0.2"]).await;
    let [a, b, c] = &cluster.replicas[..] else {
        unreachable!()
    };
    let session = a.initialize().await;
    assert!(
        !session.contains("127.0.0.1"),
        "the owner's address is sealed"
    );
    let owner_pid = text(&a.call(&session, 1, "whoami", json!({})).await);
    for (n, replica) in [b, c, b, c].iter().enumerate() {
        let id = 10 + n as u64;
        let echoed = replica
            .call(&session, id, "echo", json!({"text": format!("hi {id}")}))
            .await;
        assert_eq!(echoed.status, 200, "{}", echoed.body);
        assert_eq!(echoed.json()["id"], id);
        assert_eq!(text(&echoed), format!("hi {id}"));
    }
    assert_eq!(
        text(&c.call(&session, 20, "whoami", json!({})).await),
        owner_pid,
        "the same child serves the session wherever the request lands"
    );
    // A request that streams its answer streams through the forwarding replica too.
    let streamed = b
        .post(
            Some(&session),
            json!({"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"p"}}}),
        )
        .await;
    assert_eq!(
        streamed.headers["content-type"], "text/event-stream",
        "{}",
        streamed.body
    );
    assert!(
        streamed
            .events()
            .iter()
            .any(|e| e["method"] == "notifications/progress")
    );
    assert_eq!(streamed.events().last().unwrap()["id"], 21);

    // The GET stream through B; events made by calls through C; resumption through C.
    let mut body = b.open_stream(&session, None).await.into_body();
    c.call(&session, 30, "announce", json!({})).await;
    c.call(&session, 31, "announce", json!({})).await;
    let mut seen = String::new();
    read_until(&mut body, &mut seen, |s: &str| {
        s.matches("list_changed").count() >= 2
    })
    .await;
    let ids: Vec<&str> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids, ["1", "2"], "{seen}");
    drop(body);
    let mut resumed = c.open_stream(&session, Some("1")).await.into_body();
    let mut again = String::new();
    read_until(&mut resumed, &mut again, |s: &str| {
        s.contains("list_changed")
    })
    .await;
    assert!(
        again.contains("id: 2") && !again.contains("id: 1\n"),
        "{again}"
    );
    drop(resumed);

    assert!(metric(b, "mcp_stdio_forwarded_total{outcome=\"answered\"}").await >= 3);
    assert!(metric(a, "mcp_stdio_peer_requests_total").await >= 8);
    assert_eq!(
        metric(b, "mcp_stdio_sessions_created_total").await,
        0,
        "only the owner started a child"
    );

    // DELETE through C ends it on A.
    let deleted = c
        .send("DELETE", "/mcp", &[("mcp-session-id", &session)], "")
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let after = a.call(&session, 40, "echo", json!({})).await;
    assert_eq!(after.status, 404, "{}", after.body);
    let after = b.call(&session, 41, "echo", json!({})).await;
    assert_eq!(after.status, 404, "{}", after.body);
}

#[tokio::test]
async fn forged_ids_foreign_ids_and_forged_replica_headers_are_refused() {
    let cluster = Cluster::start(2, &["--auth-token", "tok-cluster"]).await;
    let [a, b] = &cluster.replicas[..] else {
        unreachable!()
    };
    let bearer = [("authorization", "Bearer tok-cluster")];
    let start = a
        .send(
            "POST",
            "/mcp",
            &bearer,
            &crate::common::serve::initialize_body(),
        )
        .await;
    assert_eq!(start.status, 200, "{}", start.body);
    let session = start.session();
    let call = |id: u64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}})
            .to_string()
    };
    let alive = b
        .send(
            "POST",
            "/mcp",
            &[bearer[0], ("mcp-session-id", &session)],
            &call(1),
        )
        .await;
    assert_eq!(text(&alive), "ok", "the channel works: {}", alive.body);

    // A made-up id, a tampered one, and one sealed with another cluster's key.
    let (_other_dir, other_path) = key_file(OTHER_KEY);
    let stranger = replica(&other_path, &["--auth-token", "tok-cluster"]).await;
    let foreign = stranger
        .send(
            "POST",
            "/mcp",
            &bearer,
            &crate::common::serve::initialize_body(),
        )
        .await
        .session();
    let mut tampered = session.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for id in ["0123456789abcdef0123456789abcdef", &tampered, &foreign] {
        for replica in [a, b] {
            let refused = replica
                .send(
                    "POST",
                    "/mcp",
                    &[bearer[0], ("mcp-session-id", id)],
                    &call(2),
                )
                .await;
            assert_eq!(refused.status, 404, "{id}: {}", refused.body);
        }
    }

    // A request posing as a replica: a forged header, a genuine one from another cluster,
    // and a genuine one for another request. None is served; none gets past the bearer.
    let real = library_cluster(KEY);
    let other = library_cluster(OTHER_KEY);
    let post = http::Method::POST;
    let body = call(3);
    let to_a = format!("http://127.0.0.1:{}", a.port);
    let to_b = format!("http://127.0.0.1:{}", b.port);
    let for_request = |to: &str,
                       path: &str,
                       session: Option<&str>,
                       body: &[u8],
                       from: &mcp_stdio::serve::cluster::Cluster| {
        from.introduce(
            &Bound {
                to,
                method: &post,
                path_and_query: path,
                session,
                last_event_id: None,
            },
            body,
            None,
        )
        .to_str()
        .unwrap()
        .to_owned()
    };
    let created_before = metric_with(a, &bearer, "mcp_stdio_sessions_created_total").await;
    let forged = [
        "AQ".to_owned() + &"A".repeat(60),
        for_request(&to_a, "/mcp", Some(&session), body.as_bytes(), &other),
        for_request(&to_a, "/mcp", Some(&session), b"another body", &real),
        for_request(
            &to_a,
            "/mcp",
            Some("another-session"),
            body.as_bytes(),
            &real,
        ),
        for_request(
            &to_a,
            "/mcp?other=1",
            Some(&session),
            body.as_bytes(),
            &real,
        ),
        for_request(&to_b, "/mcp", Some(&session), body.as_bytes(), &real),
    ];
    for header in &forged {
        let refused = a
            .send(
                "POST",
                "/mcp",
                &[("mcp-session-id", &session), ("mcp-stdio-peer", header)],
                &body,
            )
            .await;
        assert_eq!(refused.status, 403, "{header}: {}", refused.body);
        assert!(refused.body.contains("mcp-stdio-peer"), "{}", refused.body);
        let init = a
            .send(
                "POST",
                "/mcp",
                &[("mcp-stdio-peer", header)],
                &crate::common::serve::initialize_body(),
            )
            .await;
        assert_eq!(init.status, 403, "{}", init.body);
    }
    assert_eq!(
        metric_with(a, &bearer, "mcp_stdio_sessions_created_total").await,
        created_before,
        "nothing was started"
    );
    assert!(metric_with(a, &bearer, "mcp_stdio_peer_refused_total").await >= forged.len() as u64);
    // A genuine introduction is what lets a request past the bearer: proof the refusals
    // above were about the header, not the request.
    // (`--auth-token` callers are the one principal `bearer`.)
    let genuine = real.introduce(
        &Bound {
            to: &to_a,
            method: &post,
            path_and_query: "/mcp",
            session: Some(&session),
            last_event_id: None,
        },
        body.as_bytes(),
        Some("bearer"),
    );
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-stdio-peer", genuine.to_str().unwrap()),
    ];
    let served = a.send("POST", "/mcp", &headers, &body).await;
    assert_eq!(text(&served), "ok", "{}", served.body);
    // Once.
    let replayed = a.send("POST", "/mcp", &headers, &body).await;
    assert_eq!(replayed.status, 403, "{}", replayed.body);
    assert_eq!(
        metric_with(a, &bearer, "mcp_stdio_peer_replayed_total").await,
        1
    );
    // No secret of the cluster reaches a log.
    for replica in [a, b] {
        replica.wait_stderr("serving as one replica").await;
        assert!(!replica.stderr().contains(KEY));
        assert!(!replica.stderr().contains("tok-cluster"));
    }
}

/// A cluster as the library makes it, to mint introductions the way a replica does.
fn library_cluster(key: &str) -> mcp_stdio::serve::cluster::Cluster {
    let config =
        mcp_stdio::serve::cluster::ClusterConfig::with_key(key, "http://127.0.0.1:1").unwrap();
    mcp_stdio::serve::cluster::Cluster::new(
        &config,
        Duration::from_secs(1),
        Duration::from_secs(86_400),
    )
}

async fn metric_with(serve: &Serve, headers: &[(&str, &str)], line: &str) -> u64 {
    let metrics = serve.send("GET", "/metrics", headers, "").await.body;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0)
}

/// A sealed id carries its time; past `--session-max-age` no replica
/// routes it (404 as for an unknown id, nothing forwarded) and the owner has ended it.
#[tokio::test]
async fn a_session_id_past_its_max_age_is_routed_nowhere() {
    let cluster = Cluster::start(2, &["--session-max-age", "3"]).await;
    let [a, b] = &cluster.replicas[..] else {
        unreachable!()
    };
    let session = a.initialize().await;
    // The route works while the id is young: B forwards to A.
    assert_eq!(b.call(&session, 1, "echo", json!({})).await.status, 200);
    let answered = "mcp_stdio_forwarded_total{outcome=\"answered\"}";
    let forwarded = metric(b, answered).await;
    assert!(forwarded >= 1);
    a.wait_stderr("session reached --session-max-age").await;
    let aged = b.call(&session, 2, "echo", json!({})).await;
    assert_eq!(aged.status, 404, "{}", aged.body);
    assert_eq!(
        metric(b, answered).await,
        forwarded,
        "nothing was forwarded"
    );
    assert_eq!(a.call(&session, 3, "echo", json!({})).await.status, 404);
    // A new session routes as before.
    let fresh = a.initialize().await;
    assert_eq!(b.call(&fresh, 4, "echo", json!({})).await.status, 200);
}

#[tokio::test]
async fn a_gone_owner_means_404_and_the_other_replicas_sessions_are_untouched() {
    let mut cluster = Cluster::start(3, &[]).await;
    let on_a = cluster.replicas[0].initialize().await;
    let on_b = cluster.replicas[1].initialize().await;
    let mut a = cluster.replicas.remove(0);
    a.child.kill().await.unwrap();
    let _ = a.child.wait().await;
    let [b, c] = &cluster.replicas[..] else {
        unreachable!()
    };
    let gone = c.call(&on_a, 1, "echo", json!({"text": "x"})).await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert!(gone.body.contains("start a new session"), "{}", gone.body);
    assert_eq!(
        metric(c, "mcp_stdio_forwarded_total{outcome=\"owner_gone\"}").await,
        1
    );
    for replica in [b, c] {
        let fine = replica
            .call(&on_b, 2, "echo", json!({"text": "fine"}))
            .await;
        assert_eq!(text(&fine), "fine");
    }
}

/// `tools/call ask` declaring elicitation, optionally a retry with its state and answer.
fn ask(retry: Option<&str>) -> Value {
    let mut params = json!({"name": "ask", "arguments": {},
        "_meta": {CLIENT_CAPABILITIES: {"elicitation": {}}}});
    if let Some(state) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] =
            json!({"elicitation": {"action": "accept", "content": {"name": "Ada"}}});
    }
    params
}

#[tokio::test]
async fn a_retry_goes_to_the_replica_where_its_call_is_parked() {
    let cluster = Cluster::start(3, &[]).await;
    let [a, b, c] = &cluster.replicas[..] else {
        unreachable!()
    };
    let first = a
        .modern(json!(1), "tools/call", ask(None), Some("ask"))
        .await;
    let result = &first.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{result}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(
        !state.contains("127.0.0.1"),
        "the owner's address is sealed"
    );
    // A tampered state is refused wherever it lands, and the call stays parked.
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let refused = b
        .modern(json!(2), "tools/call", ask(Some(&tampered)), Some("ask"))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let done = c
        .modern(json!(3), "tools/call", ask(Some(&state)), Some("ask"))
        .await;
    assert_eq!(done.json()["id"], 3, "{}", done.body);
    assert_eq!(text(&done), "asked: Ada");
    assert_eq!(done.json()["result"]["resultType"], "complete");
    assert_eq!(
        metric(c, "mcp_stdio_forwarded_total{outcome=\"answered\"}").await,
        1
    );
    // Once resumed, the state is spent on every replica.
    let again = b
        .modern(json!(4), "tools/call", ask(Some(&state)), Some("ask"))
        .await;
    assert_eq!(again.status, 400, "{}", again.body);
}

#[tokio::test]
async fn a_tasks_request_goes_to_the_replica_that_holds_the_task() {
    let (_dir, key_path) = key_file(KEY);
    let tasks = [("FIXTURE_TASKS", "1")];
    let a = replica_with(&key_path, &[], &tasks).await;
    let b = replica_with(&key_path, &[], &tasks).await;
    let opted_in = |params: Value| crate::serve_tasks::opted_in(params);
    let created = a
        .modern(
            json!(1),
            "tools/call",
            opted_in(json!({"name": "confirm", "arguments": {}})),
            Some("confirm"),
        )
        .await;
    let id = created.json()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.body))
        .to_owned();
    assert!(!id.contains("127.0.0.1"), "the owner's address is sealed");
    // Asked at the replica that does not hold it: forwarded to the one that does.
    let deadline = Instant::now() + Duration::from_secs(10);
    let asking = loop {
        let got = b
            .modern(
                json!(2),
                "tasks/get",
                opted_in(json!({"taskId": id})),
                Some(&id),
            )
            .await;
        if got.json()["result"]["status"] == "input_required" {
            break got;
        }
        assert!(Instant::now() < deadline, "{}", got.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(asking.json()["result"]["taskId"], id.as_str());
    assert!(metric(&b, "mcp_stdio_forwarded_total{outcome=\"answered\"}").await >= 1);
    // A task id another cluster sealed, or a tampered one, is unknown everywhere.
    let mut tampered = id.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let refused = b
        .modern(
            json!(3),
            "tasks/get",
            opted_in(json!({"taskId": tampered})),
            Some(&tampered),
        )
        .await;
    assert_eq!(refused.json()["error"]["code"], -32602, "{}", refused.body);
}

#[tokio::test]
async fn forwarding_is_bounded_by_peer_max_connections() {
    let (_dir, key_path) = key_file(KEY);
    let owner = replica(&key_path, &[]).await;
    let forwarder = replica(&key_path, &["--peer-max-connections", "1"]).await;
    let session = owner.initialize().await;
    let stream = forwarder.open_stream(&session, None).await;
    assert_eq!(stream.status(), 200);
    let busy = forwarder
        .call(&session, 1, "echo", json!({"text": "x"}))
        .await;
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert!(
        busy.body.contains("--peer-max-connections (1)"),
        "{}",
        busy.body
    );
    assert_eq!(
        metric(&forwarder, "mcp_stdio_forwarded_total{outcome=\"busy\"}").await,
        1
    );
    drop(stream);
    // The stream's slot comes back once it is closed.
    let answer = eventually("the session is served again", async || {
        let answer = forwarder
            .call(&session, 2, "echo", json!({"text": "back"}))
            .await;
        (answer.status == 200)
            .then_some(())
            .ok_or(answer.body.clone())?;
        Ok(answer)
    })
    .await;
    assert_eq!(text(&answer), "back");
}

#[tokio::test]
async fn sigterm_drains_a_replica_its_sessions_go_on_and_it_exits_when_they_end() {
    let (_dir, key_path) = key_file(KEY);
    let mut a = replica(&key_path, &["--shutdown-grace", "60"]).await;
    let b = replica(&key_path, &[]).await;
    let session = a.initialize().await;
    let child: i32 = text(&a.call(&session, 1, "whoami", json!({})).await)
        .parse()
        .unwrap();
    assert_eq!(a.send("GET", "/readyz", &[], "").await.status, 200);
    let pid = a.child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-s", "TERM", &pid])
        .status()
        .unwrap();
    a.wait_stderr("draining").await;
    let ready = a.send("GET", "/readyz", &[], "").await;
    assert_eq!((ready.status, ready.body.as_str()), (503, "draining\n"));
    assert_eq!(a.send("GET", "/healthz", &[], "").await.status, 200);
    let refused = a
        .send(
            "POST",
            "/mcp",
            &[],
            &crate::common::serve::initialize_body(),
        )
        .await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.body.contains("another replica"), "{}", refused.body);
    // Its session goes on, directly and forwarded.
    assert_eq!(
        text(&a.call(&session, 2, "echo", json!({"text": "d"})).await),
        "d"
    );
    assert_eq!(
        text(&b.call(&session, 3, "echo", json!({"text": "f"})).await),
        "f"
    );
    // New sessions go to the others.
    b.initialize().await;
    // When its last session ends, it exits (long before the 60 s grace).
    let ended = b
        .send("DELETE", "/mcp", &[("mcp-session-id", &session)], "")
        .await;
    assert_eq!(ended.status, 200, "{}", ended.body);
    let status = tokio::time::timeout(DEADLINE, a.child.wait())
        .await
        .expect("the drained replica exits")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", a.stderr());
    wait_dead(child).await;
}

#[tokio::test]
async fn a_single_serve_ignores_the_replica_header_as_it_always_did() {
    let serve = Serve::start(&[]).await;
    let answer = serve
        .send(
            "POST",
            "/mcp",
            &[("mcp-stdio-peer", "anything")],
            &crate::common::serve::initialize_body(),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.session().len(), 32, "ids stay as they were");
}

#[test]
fn cluster_flags_are_checked_at_startup() {
    let (dir, good) = key_file(KEY);
    let open = dir.path().join("open.key");
    std::fs::write(&open, KEY).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let short = dir.path().join("short.key");
    std::fs::write(&short, "short").unwrap();
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    let open = open.to_string_lossy().into_owned();
    let short = short.to_string_lossy().into_owned();
    let advertise = "http://127.0.0.1:9";
    for (args, needle) in [
        (
            vec!["--cluster-key-file", &open, "--advertise-url", advertise],
            "chmod 600",
        ),
        (
            vec!["--cluster-key-file", &short, "--advertise-url", advertise],
            "at least 32",
        ),
        (vec!["--cluster-key-file", &good], "--advertise-url"),
        (vec!["--advertise-url", advertise], "--cluster-key-file"),
        (
            vec![
                "--cluster-key-file",
                &good,
                "--advertise-url",
                "https://10.0.0.7",
            ],
            "plain http",
        ),
        (
            vec![
                "--cluster-key-file",
                &good,
                "--advertise-url",
                "http://10.0.0.7/mcp",
            ],
            "only http://host:port",
        ),
        (
            vec![
                "--cluster-key-file",
                &good,
                "--advertise-url",
                advertise,
                "--enable-oauth",
                "--dev-user",
                "u",
            ],
            "--oauth-store postgres://",
        ),
        (
            vec![
                "--cluster-key-file",
                &good,
                "--advertise-url",
                advertise,
                "--peer-timeout",
                "5",
            ],
            "introduction lives 5 s",
        ),
    ] {
        let mut full = vec!["serve"];
        full.extend(args);
        full.extend(["--", "sh"]);
        let (code, _, stderr) = crate::common::run_to_end(&full);
        assert_ne!(code, 0, "{full:?}");
        assert!(stderr.contains(needle), "{full:?}: {stderr}");
    }
}

/// The first HTTP request in `wire` (head and body, by its Content-Length).
fn first_request(wire: &str) -> String {
    let head_end = wire.find("\r\n\r\n").expect("a request head") + 4;
    let length: usize = wire[..head_end]
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    wire[..head_end + length].to_owned()
}

/// Sends `request` as it is to `port`; the status of the answer.
async fn replay_to(port: u16, request: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.unwrap() == 1 {
        answer.push(byte[0]);
    }
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer}"))
}

/// An introduction captured on the replica hop is refused when sent
/// again, within its lifetime and after it, to its replica and to another one; nothing
/// reaches the child.
#[tokio::test]
async fn a_captured_introduction_cannot_be_replayed() {
    let (_dir, key_path) = key_file(KEY);
    // B advertises itself through a relay that records the replica hop.
    let b_port = free_port();
    let relay = crate::common::proxy::RecordingRelay::start(([127, 0, 0, 1], b_port).into()).await;
    let b_port_text = b_port.to_string();
    let advertise = format!("http://{}", relay.addr);
    let b = Serve::start(&[
        "--port",
        &b_port_text,
        "--cluster-key-file",
        &key_path,
        "--advertise-url",
        &advertise,
    ])
    .await;
    let a = replica(&key_path, &[]).await;
    let session = b.initialize().await;
    let echoed = a.call(&session, 1, "echo", json!({"text": "once"})).await;
    assert_eq!(text(&echoed), "once", "the hop works: {}", echoed.body);
    let captured_at = Instant::now();
    let served = metric(&b, "mcp_stdio_peer_requests_total").await;
    let request = first_request(&relay.text());
    assert!(request.contains("mcp-stdio-peer:"), "{request}");

    // Within its lifetime: to its replica (seen before) and to another (not for it).
    assert_eq!(replay_to(b_port, &request).await, 403);
    assert_eq!(replay_to(a.port, &request).await, 403);
    assert_eq!(metric(&b, "mcp_stdio_peer_replayed_total").await, 1);
    a.wait_stderr("made for another replica").await;
    // After its lifetime (five seconds).
    tokio::time::sleep_until((captured_at + Duration::from_secs(7)).into()).await;
    assert_eq!(replay_to(b_port, &request).await, 403);
    b.wait_stderr("older than its few seconds").await;
    assert_eq!(
        metric(&b, "mcp_stdio_peer_requests_total").await,
        served,
        "no replay reached the session"
    );
    // The hop still works for genuine forwards.
    let again = a.call(&session, 2, "echo", json!({"text": "twice"})).await;
    assert_eq!(text(&again), "twice", "{}", again.body);
}

/// `--cluster-peers` limits where forwarded requests are accepted from, and
/// `--peer-max-senders` bounds the replicas whose numbering is remembered (beyond it: 503
/// for a new one, never a forgotten number); one replica forwarding a lot stays one.
#[tokio::test]
async fn introductions_come_only_from_cluster_peers_and_their_memory_is_bounded() {
    let (_dir, key_path) = key_file(KEY);
    let elsewhere = Cluster::start(2, &["--cluster-peers", "10.0.0.0/8"]).await;
    let [a, b] = &elsewhere.replicas[..] else {
        unreachable!()
    };
    let session = b.initialize().await;
    assert_eq!(b.call(&session, 1, "echo", json!({})).await.status, 200);
    let refused = a.call(&session, 2, "echo", json!({})).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    b.wait_stderr("from outside --cluster-peers").await;

    let a = replica(&key_path, &["--cluster-peers", "127.0.0.0/8", "::1"]).await;
    let b = replica(&key_path, &["--peer-max-senders", "1"]).await;
    let c = replica(&key_path, &[]).await;
    let session = b.initialize().await;
    for id in 3..53 {
        let echoed = a.call(&session, id, "echo", json!({"text": "in"})).await;
        assert_eq!(text(&echoed), "in", "one sender, many forwards");
    }
    let full = c.call(&session, 60, "echo", json!({})).await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert!(full.body.contains("--peer-max-senders"), "{}", full.body);
}
