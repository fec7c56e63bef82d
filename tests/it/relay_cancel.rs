//! Cancellation: forwarded upstream, the HTTP exchange aborted, late answers dropped.

use crate::common::*;
use axum::http::Method;
use serde_json::json;

/// An upstream whose calls hang, and whose standalone GET stream delivers the answer for
/// `id` once `late` is notified: a late answer to a cancelled call.
fn late_answer_on_get(
    late: &'static std::sync::LazyLock<std::sync::Arc<tokio::sync::Notify>>,
    id: &'static str,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |seen| {
        if seen.method == Method::GET {
            return Reply::Sse {
                headers: vec![],
                steps: vec![
                    Step::Wait((*late).clone()),
                    event(
                        "g1",
                        json!({"jsonrpc":"2.0","id":id,"result":{"late":true}}),
                    ),
                    Step::Hang,
                ],
            };
        }
        standard(seen).unwrap_or(Reply::Sse {
            headers: vec![],
            steps: vec![priming("p1", None), Step::Hang],
        })
    }
}

/// Initializes, waits for the GET stream, starts a call with `id` that hangs upstream, and
/// cancels it.
async fn start_then_cancel(relay: &mut Relay, upstream: &Upstream, id: &str) {
    relay.initialize().await;
    upstream
        .wait_until("the GET stream", |s| {
            s.iter().any(|s| s.method == Method::GET)
        })
        .await;
    relay
        .send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"slow"}}))
        .await;
    upstream.wait_for_method("tools/call").await;
    relay
        .send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id,"reason":"user"}}))
        .await;
}

static LATE: std::sync::LazyLock<std::sync::Arc<tokio::sync::Notify>> =
    std::sync::LazyLock::new(Default::default);

#[tokio::test]
async fn cancel_aborts_the_upstream_exchange_and_drops_the_late_answer() {
    let upstream = Upstream::start(late_answer_on_get(&LATE, "c1")).await;
    let mut relay = Relay::start(&upstream.url, &[]).await;
    start_then_cancel(&mut relay, &upstream, "c1").await;
    // The call's HTTP exchange is torn down, and the cancel is forwarded upstream.
    upstream.wait_dropped(1).await;
    let cancels = upstream.wait_for_method("notifications/cancelled").await;
    let cancel = cancels
        .iter()
        .find(|s| s.rpc_method().as_deref() == Some("notifications/cancelled"))
        .unwrap();
    assert_eq!(cancel.json()["params"]["requestId"], "c1");

    // The upstream answers anyway, late; the relay sees it and the host must not.
    LATE.notify_one();
    relay
        .wait_stderr("dropped the late answer to a cancelled request")
        .await;
    let before = relay.ping_through("alive-1").await;
    assert!(before.is_empty(), "late answer leaked: {before:?}");
}

#[tokio::test]
async fn with_no_cancel_filter_the_answer_is_delivered() {
    let upstream = Upstream::start(|seen| {
        standard(seen).unwrap_or_else(|| {
            let request = seen.json();
            Reply::Sse {
                headers: vec![],
                steps: vec![
                    Step::Wait(LATE2.clone()),
                    data(result_for(&request, json!({"late": true}))),
                ],
            }
        })
    })
    .await;
    let mut relay = Relay::start(&upstream.url, &["--no-cancel-filter"]).await;
    relay.initialize().await;
    relay
        .send(json!({"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"slow"}}))
        .await;
    upstream.wait_for_method("tools/call").await;
    relay
        .send(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c2"}}),
        )
        .await;
    upstream.wait_for_method("notifications/cancelled").await;
    LATE2.notify_one();
    assert_eq!(relay.recv().await["result"]["late"], true);
}

static LATE2: std::sync::LazyLock<std::sync::Arc<tokio::sync::Notify>> =
    std::sync::LazyLock::new(Default::default);

static LATE3: std::sync::LazyLock<std::sync::Arc<tokio::sync::Notify>> =
    std::sync::LazyLock::new(Default::default);

#[tokio::test]
async fn a_cancelled_id_is_forgotten_after_cancel_ttl() {
    let upstream = Upstream::start(late_answer_on_get(&LATE3, "c3")).await;
    let mut relay = Relay::start(&upstream.url, &["--cancel-ttl", "0.05"]).await;
    start_then_cancel(&mut relay, &upstream, "c3").await;
    upstream.wait_for_method("notifications/cancelled").await;
    // Not a wait for an event: the bound under test is time itself. 0.3 s is six TTLs.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    LATE3.notify_one();
    // Past the TTL the id is no longer remembered as cancelled: the late answer is an
    // unknown one (a warning), and it still never reaches the host.
    relay
        .wait_stderr("dropped an upstream answer that matches no pending request")
        .await;
    let before = relay.ping_through("alive").await;
    assert!(before.is_empty(), "late answer leaked: {before:?}");
    assert!(
        !relay
            .stderr()
            .contains("late answer to a cancelled request")
    );
}
