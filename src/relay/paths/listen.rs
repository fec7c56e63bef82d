//! Change notifications for a legacy host from a 2026-07-28 server: the host's interest
//! (list changes the server advertises, `resources/subscribe`) is carried on one
//! `subscriptions/listen` stream, re-opened when the interest changes or the stream drops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::host_profile::HostProfile;
use crate::era::META_SUBSCRIPTION_ID;
use crate::era::envelope;
use crate::era::request::request_line;
use crate::jsonrpc::message::{IdKey, Kind, Message};
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::context::Ctx;
use crate::relay::detect::modern_headers;
use crate::relay::link::session::Wire;

/// What the host wants to hear about: a listen filter.
pub type Interest = crate::era::listen::Filter;

pub struct Listens {
    interest: watch::Sender<Interest>,
    running: AtomicBool,
    version: Mutex<String>,
    /// The host's envelope, stamped on every listen.
    profile: Arc<HostProfile>,
}

impl Listens {
    pub fn new(profile: Arc<HostProfile>) -> Self {
        Self {
            interest: watch::Sender::new(Interest::default()),
            running: AtomicBool::new(false),
            version: Mutex::new(String::new()),
            profile,
        }
    }

    /// Registers interest in the list changes the server advertises; starts the stream.
    pub fn start(&self, ctx: &Arc<Ctx>, version: &str, capabilities: Option<&Value>) {
        let advertised = |family: &str| {
            capabilities
                .and_then(|c| c.get(family))
                .and_then(|f| f.get("listChanged"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        self.interest.send_modify(|interest| {
            interest.tools = advertised("tools");
            interest.prompts = advertised("prompts");
            interest.resources = advertised("resources");
        });
        self.ensure_running(ctx, version);
    }

    pub fn subscribe(&self, ctx: &Arc<Ctx>, version: &str, uri: String) {
        self.interest
            .send_if_modified(|interest| interest.uris.insert(uri));
        self.ensure_running(ctx, version);
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.interest
            .send_if_modified(|interest| interest.uris.remove(uri));
    }

    fn ensure_running(&self, ctx: &Arc<Ctx>, version: &str) {
        *self.version.lock().expect("version lock") = version.to_owned();
        if !self.running.swap(true, Ordering::SeqCst) {
            let ctx = ctx.clone();
            let interest = self.interest.subscribe();
            let version = version.to_owned();
            let profile = self.profile.clone();
            tokio::spawn(async move { run(ctx, profile, interest, version).await });
        }
    }
}

/// How one listen stream ended.
enum Ended {
    /// The server ended it with a result: nothing more to hear until the interest changes.
    Graceful,
    /// The server refused the listen (an error answer or an HTTP error): same.
    Refused(String),
    /// It broke without a result; `acknowledged` says whether it had started.
    Dropped { acknowledged: bool, why: String },
}

async fn run(
    ctx: Arc<Ctx>,
    profile: Arc<HostProfile>,
    mut interest: watch::Receiver<Interest>,
    version: String,
) {
    let mut failures = 0u32;
    let mut dropped_before = false;
    loop {
        let wanted = interest.borrow_and_update().clone();
        if wanted.is_empty() {
            if interest.changed().await.is_err() {
                return;
            }
            continue;
        }
        let ended = tokio::select! {
            ended = listen_once(&ctx, &profile, &wanted, &version, dropped_before) => ended,
            changed = interest.changed() => {
                if changed.is_err() {
                    return;
                }
                tracing::debug!("the host's interest changed; listening again");
                continue;
            }
        };
        let wait = match ended {
            Ended::Graceful => {
                tracing::debug!("the server ended the listen stream");
                None
            }
            Ended::Refused(why) => {
                tracing::warn!(problem = %why, "the server refused subscriptions/listen; change notifications are off until the host's interest changes");
                None
            }
            Ended::Dropped { acknowledged, why } => {
                failures = if acknowledged { 1 } else { failures + 1 };
                dropped_before = true;
                if failures > ctx.config.max_reconnects {
                    tracing::warn!(attempts = failures, problem = %why, "gave up on the listen stream");
                    None
                } else {
                    tracing::debug!(problem = %why, "the listen stream dropped; listening again");
                    Some(Duration::from_millis(500 * u64::from(failures.min(20))))
                }
            }
        };
        match wait {
            Some(delay) => {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    changed = interest.changed() => if changed.is_err() { return },
                }
            }
            None => {
                if interest.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn listen_once(
    ctx: &Ctx,
    profile: &HostProfile,
    wanted: &Interest,
    version: &str,
    resync: bool,
) -> Ended {
    let mut params = Map::new();
    envelope::stamp(&mut params, &profile.get().stamp(version));
    params.insert("notifications".into(), wanted.honoured());
    let id = ctx.next_upstream_id("listen");
    let raw_id = serde_json::to_string(&id).expect("a string serializes");
    let headers = match modern_headers(version, "subscriptions/listen", Some(&params)) {
        Ok(headers) => headers,
        Err(failure) => return Ended::Refused(failure.message),
    };
    let outgoing = Outgoing {
        body: Bytes::from(request_line(&raw_id, "subscriptions/listen", &params)),
        id: &IdKey::Str(id),
        raw_id: &raw_id,
        wire: Wire::Modern {
            headers: &headers,
            long_lived: true,
        },
        replay_safe: true,
    };
    let mut acknowledged = false;
    let out = ctx.gate.outbox().clone();
    let answer = call(ctx, outgoing, &mut |message, _| {
        on_stream(message, wanted, &mut acknowledged, resync, &out)
    })
    .await;
    match answer {
        Ok(line) if crate::relay::link::response::error_code(&line).is_some() => {
            Ended::Refused(String::from_utf8_lossy(&line).into_owned())
        }
        Ok(_) => Ended::Graceful,
        Err(failure) => {
            let status = failure
                .data
                .as_ref()
                .and_then(|d| d.get("httpStatus"))
                .and_then(Value::as_u64);
            match status {
                Some(400..=499) if !matches!(status, Some(408 | 429)) => {
                    Ended::Refused(failure.message)
                }
                _ => Ended::Dropped {
                    acknowledged,
                    why: failure.message,
                },
            }
        }
    }
}

/// One message on the listen stream: the acknowledgement, or a notification for the host
/// (without the subscription tag, which a legacy host has no use for).
fn on_stream(
    message: &Message<'_>,
    wanted: &Interest,
    acknowledged: &mut bool,
    resync: bool,
    out: &crate::jsonrpc::writer::Outbox,
) -> Aside {
    if message.kind != Kind::Notification {
        return Aside::Ignore;
    }
    let method = message.method.as_deref().unwrap_or_default();
    let params: Option<Value> = message
        .params
        .and_then(|p| serde_json::from_str(p.get()).ok());
    if method == "notifications/subscriptions/acknowledged" {
        *acknowledged = true;
        tracing::debug!(honoured = %params.as_ref().and_then(|p| p.get("notifications")).cloned().unwrap_or_default(), "listen stream acknowledged");
        if resync {
            // Notifications may have been missed while the stream was down: tell the host
            // to fetch its lists again.
            let lines: Vec<Vec<u8>> = [
                (wanted.tools, "notifications/tools/list_changed"),
                (wanted.prompts, "notifications/prompts/list_changed"),
                (wanted.resources, "notifications/resources/list_changed"),
            ]
            .into_iter()
            .filter(|(wanted, _)| *wanted)
            .map(|(_, method)| format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#).into_bytes())
            .collect();
            let out = out.clone();
            tokio::spawn(async move {
                for line in lines {
                    out.send(line).await;
                }
            });
        }
        return Aside::Ignore;
    }
    if !wanted.wants(method, params.as_ref()) {
        return Aside::Ignore;
    }
    let mut notification = json!({"jsonrpc": "2.0", "method": method});
    if let Some(mut params) = params {
        if let Some(Value::Object(meta)) = params.get_mut("_meta") {
            meta.remove(META_SUBSCRIPTION_ID);
            if meta.is_empty() {
                params.as_object_mut().map(|p| p.remove("_meta"));
            }
        }
        if params.as_object().is_some_and(|p| !p.is_empty()) {
            notification["params"] = params;
        }
    }
    Aside::Host(serde_json::to_vec(&notification).expect("JSON serializes"))
}
