//! What every session of one aggregate endpoint shares: the catalog of its servers' lists,
//! each server's handshake and state, and the endpoint's own session with each server
//! (the scout) through which those are read. A server that fails to start, dies or stops
//! answering is marked down and left out of lists; it is tried again after
//! `RETRY_AFTER`, and used again once it answers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::scout;
use super::{AggregateFlags, AggregateSpec, Members};
use crate::serve::aggregate::catalog::Catalog;
use crate::serve::aggregate::cursor::CursorError;
use crate::serve::aggregate::handshake::{merged_capabilities, merged_instructions};
use crate::serve::aggregate::route::{self, List, Target, Unroutable};
use crate::serve::session::Session;

/// How long a server that failed is left alone before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// A server's state as `/readyz` and `/metrics` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Not asked anything yet.
    NotStarted,
    Up,
    /// Left out, and why.
    Down(String),
}

/// The endpoint's own session with one server.
#[derive(Default)]
struct Scout {
    session: Option<Arc<Session>>,
    handshake: Option<Value>,
    failed_at: Option<Instant>,
}

pub struct Endpoint {
    pub spec: AggregateSpec,
    pub flags: AggregateFlags,
    members: Arc<dyn Members>,
    catalog: Mutex<Catalog>,
    scouts: Vec<tokio::sync::Mutex<Scout>>,
    states: Mutex<Vec<ServerState>>,
    /// One list read at a time: concurrent first `tools/list`s wait for the same read.
    reading: tokio::sync::Mutex<()>,
    /// Notifications for every client of the endpoint (a list changed).
    pub changes: broadcast::Sender<Bytes>,
}

impl Endpoint {
    /// Checks the names (servers, separator, URI prefixes) at load.
    pub fn new(
        spec: AggregateSpec,
        flags: AggregateFlags,
        members: Arc<dyn Members>,
    ) -> Result<Arc<Endpoint>, String> {
        let catalog = Catalog::new(
            spec.servers.clone(),
            &spec.separator,
            spec.aliases.clone(),
            flags.max_list_items,
        )
        .map_err(|e| format!("aggregate endpoint {:?}: {e}", spec.name))?;
        let count = spec.servers.len();
        Ok(Arc::new(Endpoint {
            scouts: (0..count).map(|_| Default::default()).collect(),
            states: Mutex::new(vec![ServerState::NotStarted; count]),
            catalog: Mutex::new(catalog),
            reading: tokio::sync::Mutex::new(()),
            changes: broadcast::channel(64).0,
            members,
            spec,
            flags,
        }))
    }

    pub fn members(&self) -> &dyn Members {
        &*self.members
    }

    pub fn server_name(&self, server: usize) -> &str {
        &self.spec.servers[server]
    }

    /// Each server's state, in the config's order.
    pub fn states(&self) -> Vec<(String, ServerState)> {
        let states = self.states.lock().expect("states lock");
        self.spec
            .servers
            .iter()
            .cloned()
            .zip(states.iter().cloned())
            .collect()
    }

    /// The endpoint's session with `server` and its handshake: the one it has, or one
    /// started now (unless it failed less than `RETRY_AFTER` ago).
    async fn scout(self: &Arc<Self>, server: usize) -> Result<(Arc<Session>, Value), String> {
        let mut scout = self.scouts[server].lock().await;
        if let (Some(session), Some(handshake)) = (&scout.session, &scout.handshake)
            && !session.ended.is_cancelled()
        {
            return Ok((session.clone(), handshake.clone()));
        }
        if scout.failed_at.is_some_and(|at| at.elapsed() < RETRY_AFTER) {
            return Err(self.why_down(server));
        }
        let name = self.server_name(server).to_owned();
        let started = tokio::time::timeout(
            self.flags.timeout,
            scout::start(&*self.members, &name, self.flags.timeout),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "it did not start and answer its handshake within {} s (--aggregate-timeout)",
                self.flags.timeout.as_secs_f64()
            ))
        });
        match started {
            Ok((session, handshake)) => {
                scout.session = Some(session.clone());
                scout.handshake = Some(handshake.clone());
                scout.failed_at = None;
                drop(scout);
                self.set_state(server, ServerState::Up);
                self.watch(server, session.clone());
                Ok((session, handshake))
            }
            Err(why) => {
                scout.session = None;
                scout.failed_at = Some(Instant::now());
                drop(scout);
                tracing::warn!(aggregate = %self.spec.name, server = %name, "left out until it answers: {why}");
                self.set_state(server, ServerState::Down(why));
                Err(self.why_down(server))
            }
        }
    }

    fn why_down(&self, server: usize) -> String {
        let why = match &self.states.lock().expect("states lock")[server] {
            ServerState::Down(why) => why.clone(),
            _ => "it is not answering".into(),
        };
        format!(
            "the server {:?} behind this endpoint is unavailable ({why}); the endpoint's other servers go on",
            self.server_name(server)
        )
    }

    fn set_state(&self, server: usize, state: ServerState) {
        let down = matches!(state, ServerState::Down(_));
        let was_down = {
            let mut states = self.states.lock().expect("states lock");
            let was = matches!(states[server], ServerState::Down(_));
            states[server] = state;
            was
        };
        if down != was_down {
            self.catalog
                .lock()
                .expect("catalog lock")
                .set_down(server, down);
            // Clients list again: a server left out, or back.
            for list in [List::Tools, List::Prompts, List::Resources] {
                self.announce(list);
            }
        }
    }

    /// A server failed a call or a read: left out until it answers again.
    pub fn mark_down(&self, server: usize, why: String) {
        if let Ok(mut scout) = self.scouts[server].try_lock() {
            if let Some(session) = scout.session.take() {
                session.end.cancel();
            }
            scout.failed_at = Some(Instant::now());
        }
        self.set_state(server, ServerState::Down(why));
    }

    /// Follows the scout session: its list changes refresh the catalog; its end marks the
    /// server down.
    fn watch(self: &Arc<Self>, server: usize, session: Arc<Session>) {
        let endpoint = Arc::downgrade(self);
        let mut changes = session.events.changes.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(line) => {
                            let Some(endpoint) = endpoint.upgrade() else { return };
                            if let Some(list) = changed_list(&line) {
                                endpoint.list_changed(server, list);
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            let Some(endpoint) = endpoint.upgrade() else { return };
                            for list in [List::Tools, List::Prompts, List::Resources] {
                                endpoint.list_changed(server, list);
                            }
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                    () = session.ended.cancelled() => break,
                }
            }
            if let Some(endpoint) = endpoint.upgrade() {
                tracing::warn!(aggregate = %endpoint.spec.name, server = %endpoint.server_name(server), "the server's session ended; left out until it answers again");
                endpoint.mark_down(server, "its session ended".into());
            }
        });
    }

    /// A server said one of its lists changed: read again before the next answer, and
    /// every client is told.
    pub fn list_changed(&self, server: usize, list: List) {
        self.catalog
            .lock()
            .expect("catalog lock")
            .forget(list, server);
        if list == List::Resources {
            self.catalog
                .lock()
                .expect("catalog lock")
                .forget(List::ResourceTemplates, server);
        }
        self.announce(list);
    }

    fn announce(&self, list: List) {
        let method = match list {
            List::Tools => "notifications/tools/list_changed",
            List::Prompts => "notifications/prompts/list_changed",
            List::Resources | List::ResourceTemplates => "notifications/resources/list_changed",
        };
        let line = json!({"jsonrpc": "2.0", "method": method}).to_string();
        let _ = self.changes.send(Bytes::from(line));
    }

    /// Every server's handshake (`None` for one that is down), asked of
    /// `--aggregate-concurrency` servers at a time. Fail closed: an error naming the
    /// first server that is down.
    pub async fn handshakes(self: &Arc<Self>) -> Result<Vec<Option<Value>>, String> {
        let count = self.spec.servers.len();
        let mut results: Vec<(usize, Result<Value, String>)> = futures_util::stream::iter(0..count)
            .map(|server| async move {
                (
                    server,
                    self.scout(server).await.map(|(_, handshake)| handshake),
                )
            })
            .buffer_unordered(self.flags.concurrency)
            .collect()
            .await;
        results.sort_by_key(|(server, _)| *server);
        if self.spec.fail_closed
            && let Some((_, Err(why))) = results.iter().find(|(_, r)| r.is_err())
        {
            return Err(format!("{why} (this endpoint fails closed)"));
        }
        Ok(results.into_iter().map(|(_, r)| r.ok()).collect())
    }

    /// The `initialize` result for a client that asked for `version`.
    pub async fn initialize_result(self: &Arc<Self>, version: &str) -> Result<Value, String> {
        let handshakes = self.handshakes().await?;
        let capabilities: Vec<&Value> = handshakes
            .iter()
            .flatten()
            .filter_map(|h| h.get("capabilities"))
            .collect();
        let instructions: Vec<Option<&str>> = handshakes
            .iter()
            .map(|h| {
                h.as_ref()
                    .and_then(|h| h.get("instructions"))
                    .and_then(Value::as_str)
            })
            .collect();
        let version = if crate::era::LEGACY_VERSIONS.contains(&version) {
            version
        } else {
            crate::era::LATEST_LEGACY_VERSION
        };
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": merged_capabilities(&capabilities),
            "serverInfo": {"name": format!("mcp-stdio aggregate {}", self.spec.name), "version": env!("CARGO_PKG_VERSION")},
        });
        if let Some(text) =
            merged_instructions(&self.spec.servers, &instructions, &self.spec.separator)
        {
            result["instructions"] = Value::String(text);
        }
        Ok(result)
    }

    /// Reads every list in `lists` that is not known yet from each server that is up.
    pub async fn read_lists(self: &Arc<Self>, lists: &[List]) -> Result<(), String> {
        let _reading = self.reading.lock().await;
        for &list in lists {
            let unread = self.catalog.lock().expect("catalog lock").unread(list);
            if unread.is_empty() {
                continue;
            }
            let reads: Vec<(usize, Result<Vec<Value>, String>)> =
                futures_util::stream::iter(unread)
                    .map(|server| async move { (server, self.read_one(server, list).await) })
                    .buffer_unordered(self.flags.concurrency)
                    .collect()
                    .await;
            for (server, read) in reads {
                let recorded = read.and_then(|items| {
                    self.catalog
                        .lock()
                        .expect("catalog lock")
                        .record(list, server, items)
                });
                if let Err(why) = recorded {
                    tracing::error!(aggregate = %self.spec.name, server = %self.server_name(server), list = list.key(), "left out: {why}");
                    if self.spec.fail_closed {
                        return Err(format!(
                            "the {} of the server {:?} cannot be listed: {why} (this endpoint fails closed)",
                            list.key(),
                            self.server_name(server)
                        ));
                    }
                    self.catalog
                        .lock()
                        .expect("catalog lock")
                        .record(list, server, Vec::new())
                        .ok();
                }
            }
        }
        if self.spec.fail_closed
            && let Some((name, ServerState::Down(why))) = self
                .states()
                .into_iter()
                .find(|(_, s)| matches!(s, ServerState::Down(_)))
        {
            return Err(format!(
                "the server {name:?} behind this endpoint is unavailable ({why}) and this endpoint fails closed"
            ));
        }
        Ok(())
    }

    async fn read_one(self: &Arc<Self>, server: usize, list: List) -> Result<Vec<Value>, String> {
        let (session, handshake) = self.scout(server).await?;
        if !scout::offers(&handshake, list) {
            return Ok(Vec::new());
        }
        let read = tokio::time::timeout(
            self.flags.timeout,
            scout::read_list(
                &session,
                list,
                self.flags.timeout,
                self.flags.max_list_items,
            ),
        )
        .await;
        match read {
            Ok(Ok(items)) => Ok(items),
            Ok(Err(why)) if why.contains("--aggregate-max-list-items") => Err(why),
            Ok(Err(why)) => {
                self.mark_down(server, why.clone());
                Err(why)
            }
            Err(_) => {
                let why = format!(
                    "no answer to {} within {} s (--aggregate-timeout)",
                    list.method(),
                    self.flags.timeout.as_secs_f64()
                );
                self.mark_down(server, why.clone());
                Err(why)
            }
        }
    }

    /// One page of a merged list, for a client's cursor.
    pub fn page(
        &self,
        list: List,
        cursor: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), CursorError> {
        self.catalog
            .lock()
            .expect("catalog lock")
            .page(list, cursor, self.flags.page_size)
    }

    /// Where a request goes (the lists it needs read first by the caller).
    pub fn route(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Result<Target, Unroutable>> {
        let mut catalog = self.catalog.lock().expect("catalog lock");
        route::route(method, params, &catalog.tables())
    }

    /// A result from `server` with its resource URIs published.
    pub fn publish_uris(&self, server: usize, result: &mut Value) {
        let catalog = self.catalog.lock().expect("catalog lock");
        crate::serve::aggregate::lists::publish_result_uris(catalog.uris(), server, result);
    }

    /// A URI as published for `server`.
    pub fn publish_uri(&self, server: usize, uri: &str) -> String {
        self.catalog
            .lock()
            .expect("catalog lock")
            .uris()
            .publish(server, uri)
    }

    /// Ends the scouts (the endpoint stops).
    pub fn stop(&self) {
        for scout in &self.scouts {
            if let Ok(mut scout) = scout.try_lock()
                && let Some(session) = scout.session.take()
            {
                session.end.cancel();
            }
        }
    }
}

/// The list a `notifications/*/list_changed` line names.
pub fn changed_list(line: &[u8]) -> Option<List> {
    let parsed = crate::jsonrpc::message::parse(line).ok()?;
    match parsed.method.as_deref()? {
        "notifications/tools/list_changed" => Some(List::Tools),
        "notifications/prompts/list_changed" => Some(List::Prompts),
        "notifications/resources/list_changed" => Some(List::Resources),
        _ => None,
    }
}
