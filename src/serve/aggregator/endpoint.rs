//! What every session of one aggregate endpoint shares: each server's state, the ask
//! profiles (a catalog of lists per kind of client, `profile.rs`) and the endpoint's own
//! sessions with each server through which those are read. A server that fails to start,
//! dies or stops answering is marked down and left out of lists; it is tried again after
//! `--aggregate-retry-after`, and used again once it answers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::profile::Profile;
use super::scout;
use super::settings::{AggregateFlags, AggregateSpec, Members};
use crate::serve::aggregate::catalog::Catalog;
use crate::serve::aggregate::handshake::{AskProfile, merged_capabilities, merged_instructions};
use crate::serve::aggregate::route::List;
use crate::serve::aggregate::uris::UriPrefixes;
use crate::serve::session::Session;

/// A server's state as `/readyz` and `/metrics` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Not asked anything yet.
    NotStarted,
    Up,
    /// Left out, and why.
    Down(String),
}

pub struct Endpoint {
    pub spec: AggregateSpec,
    pub flags: AggregateFlags,
    members: Arc<dyn Members>,
    uris: UriPrefixes,
    states: Mutex<Vec<ServerState>>,
    /// At most 32 (`AskProfile`): one per kind of client seen.
    profiles: Mutex<BTreeMap<AskProfile, Arc<Profile>>>,
    /// Notifications for every client of the endpoint (a list changed).
    pub changes: broadcast::Sender<Bytes>,
    /// A call started trying the servers that are down again, in the background.
    pub(super) reviving: std::sync::atomic::AtomicBool,
    /// Per server: a reload is replacing it (`servers_replacing`), so no scout is started
    /// on its old generation and one that ends is not restarted or marked down.
    replacing: Vec<AtomicBool>,
    /// `stop` was called: a scout that finishes starting afterwards is ended at once.
    stopped: AtomicBool,
}

impl Endpoint {
    /// Checks the names (servers, separator, URI prefixes) at load.
    pub fn new(
        spec: AggregateSpec,
        flags: AggregateFlags,
        members: Arc<dyn Members>,
    ) -> Result<Arc<Endpoint>, String> {
        Catalog::new(
            spec.servers.clone(),
            &spec.separator,
            spec.aliases.clone(),
            1,
        )
        .map_err(|e| format!("aggregate endpoint {:?}: {e}", spec.name))?;
        let uris = UriPrefixes::new(&spec.servers)?;
        let count = spec.servers.len();
        Ok(Arc::new(Endpoint {
            states: Mutex::new(vec![ServerState::NotStarted; count]),
            profiles: Mutex::new(BTreeMap::new()),
            // A client's session that falls this far behind is told every list changed
            // (`backend::Inner::follow_endpoint`), so the size loses nothing.
            changes: broadcast::channel(64).0,
            reviving: std::sync::atomic::AtomicBool::new(false),
            replacing: (0..count).map(|_| AtomicBool::new(false)).collect(),
            stopped: AtomicBool::new(false),
            uris,
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

    /// Whether any server is down (asked on every call: no copy of the states).
    pub fn any_down(&self) -> bool {
        self.states
            .lock()
            .expect("states lock")
            .iter()
            .any(|s| matches!(s, ServerState::Down(_)))
    }

    /// The lists and scouts of clients that can be asked what `capabilities` declare.
    pub fn profile(&self, capabilities: &Value) -> Arc<Profile> {
        let ask = AskProfile::of(capabilities);
        let mut profiles = self.profiles.lock().expect("profiles lock");
        if let Some(profile) = profiles.get(&ask) {
            return profile.clone();
        }
        let down: Vec<bool> = self
            .states
            .lock()
            .expect("states lock")
            .iter()
            .map(|s| matches!(s, ServerState::Down(_)))
            .collect();
        let profile = Arc::new(
            Profile::new(ask, &self.spec, &self.flags, &down).expect("names checked at load"),
        );
        profiles.insert(ask, profile.clone());
        profile
    }

    fn every_profile(&self) -> Vec<Arc<Profile>> {
        self.profiles
            .lock()
            .expect("profiles lock")
            .values()
            .cloned()
            .collect()
    }

    /// The profile's session with `server` and its handshake: the one it has, or one
    /// started now (unless the server failed less than `--aggregate-retry-after` ago).
    pub(super) async fn scout(
        self: &Arc<Self>,
        profile: &Arc<Profile>,
        server: usize,
    ) -> Result<(Arc<Session>, Value), String> {
        let mut scout = profile.scouts[server].lock().await;
        if let (Some(session), Some(handshake)) = (&scout.session, &scout.handshake)
            && !session.ended.is_cancelled()
        {
            let found = (session.clone(), handshake.clone());
            drop(scout);
            // It answers: whatever marked it down meanwhile is over.
            self.set_state(server, ServerState::Up);
            return Ok(found);
        }
        if scout
            .failed_at
            .is_some_and(|at| at.elapsed() < self.flags.retry_after)
        {
            return Err(self.why_down(server));
        }
        if self.replacing[server].load(Ordering::SeqCst) {
            return Err(format!(
                "the server {:?} behind this endpoint is being reloaded; try again in a moment",
                self.server_name(server)
            ));
        }
        let name = self.server_name(server).to_owned();
        let wait = self.flags.timeout;
        let capabilities = profile.ask.capabilities();
        let started = tokio::time::timeout(
            wait,
            scout::start(&*self.members, &name, wait, capabilities),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "it did not start and answer its handshake within {} s (--aggregate-timeout)",
                wait.as_secs_f64()
            ))
        });
        match started {
            Ok((session, _)) if self.stopped.load(Ordering::SeqCst) => {
                session.end.cancel();
                Err("the aggregate endpoint stopped".into())
            }
            Ok((session, handshake)) => {
                scout.session = Some(session.clone());
                scout.handshake = Some(handshake.clone());
                scout.failed_at = None;
                drop(scout);
                self.set_state(server, ServerState::Up);
                self.watch(profile, server, session.clone());
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
            for profile in self.every_profile() {
                profile.set_down(server, down);
            }
            // Clients list again: a server left out, or back.
            for list in [List::Tools, List::Prompts, List::Resources] {
                self.announce(list);
            }
        }
    }

    /// A server failed a call or a read: left out until it answers again.
    pub fn mark_down(&self, server: usize, why: String) {
        for profile in self.every_profile() {
            profile.end_scout(server);
            if let Ok(mut scout) = profile.scouts[server].try_lock() {
                scout.failed_at = Some(Instant::now());
            }
        }
        self.set_state(server, ServerState::Down(why));
    }

    /// Follows a scout session: its list changes refresh the catalogs; its end marks the
    /// server down.
    fn watch(self: &Arc<Self>, profile: &Arc<Profile>, server: usize, session: Arc<Session>) {
        let endpoint = Arc::downgrade(self);
        let profile = Arc::downgrade(profile);
        let started = Instant::now();
        let mut changes = session.events.changes.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    change = changes.recv() => {
                        let Some(endpoint) = endpoint.upgrade() else { return };
                        match change {
                            Ok(line) => {
                                if let Some(list) = changed_list(&line) {
                                    endpoint.list_changed(server, list);
                                }
                            }
                            Err(broadcast::error::RecvError::Lagged(_)) => {
                                for list in [List::Tools, List::Prompts, List::Resources] {
                                    endpoint.list_changed(server, list);
                                }
                            }
                            Err(broadcast::error::RecvError::Closed) => break,
                        }
                    }
                    () = session.ended.cancelled() => break,
                }
            }
            // Ended by the server (it exited) or by the gateway (its age): started again at
            // once; only a server that does not answer then is left out, and one whose
            // sessions keep ending at once is not restarted in a loop.
            let Some(endpoint) = endpoint.upgrade() else {
                return;
            };
            // Ended because a reload replaces it, or replaced it: nothing to do.
            if endpoint.replacing[server].load(Ordering::SeqCst) {
                return;
            }
            if let Some(profile) = profile.upgrade() {
                let scout = profile.scouts[server].lock().await;
                if !scout
                    .session
                    .as_ref()
                    .is_some_and(|s| Arc::ptr_eq(s, &session))
                {
                    return;
                }
            }
            if started.elapsed() < endpoint.flags.retry_after {
                tracing::warn!(aggregate = %endpoint.spec.name, server = %endpoint.server_name(server), "the server's session ended at once; left out until it answers again");
                endpoint.mark_down(server, "its session ended".into());
                return;
            }
            if let Some(profile) = profile.upgrade() {
                tracing::info!(aggregate = %endpoint.spec.name, server = %endpoint.server_name(server), "the endpoint's own session with the server ended; starting another");
                if let Ok(mut scout) = profile.scouts[server].try_lock() {
                    scout.session = None;
                }
                endpoint.restart_scout(profile, server);
            }
        });
    }

    /// Starts a profile's session with `server` again (from the task that saw the last one
    /// end: boxed, as that task is itself started by `scout`).
    fn restart_scout(self: Arc<Self>, profile: Arc<Profile>, server: usize) {
        let again: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move {
                let _ = self.scout(&profile, server).await;
            });
        tokio::spawn(again);
    }

    /// A server said one of its lists changed: read again before the next answer, and
    /// every client is told.
    pub fn list_changed(&self, server: usize, list: List) {
        for profile in self.every_profile() {
            profile.forget(list, server);
            if list == List::Resources {
                profile.forget(List::ResourceTemplates, server);
            }
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
    pub async fn handshakes(
        self: &Arc<Self>,
        profile: &Arc<Profile>,
    ) -> Result<Vec<Option<Value>>, String> {
        let count = self.spec.servers.len();
        let mut results: Vec<(usize, Result<Value, String>)> = futures_util::stream::iter(0..count)
            .map(
                |server| async move { (server, self.scout(profile, server).await.map(|(_, h)| h)) },
            )
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

    /// The `initialize` result for a client of `profile` that asked for `version`.
    pub async fn initialize_result(
        self: &Arc<Self>,
        profile: &Arc<Profile>,
        version: &str,
    ) -> Result<Value, String> {
        let handshakes = self.handshakes(profile).await?;
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

    /// Why a name that leads nowhere does: its server is down (`None`: it is not).
    pub fn down_server_of(&self, public: &str) -> Option<String> {
        let states = self.states.lock().expect("states lock");
        let server = self.spec.servers.iter().position(|server| {
            public
                .strip_prefix(server.as_str())
                .is_some_and(|rest| rest.starts_with(&self.spec.separator))
        })?;
        let down = matches!(states[server], ServerState::Down(_));
        drop(states);
        down.then(|| self.why_down(server))
    }

    /// A result from `server` with its resource URIs published.
    pub fn publish_uris(&self, server: usize, result: &mut Value) {
        crate::serve::aggregate::lists::publish_result_uris(&self.uris, server, result);
    }

    /// A URI as published for `server`.
    pub fn publish_uri(&self, server: usize, uri: &str) -> String {
        self.uris.publish(server, uri)
    }

    /// Ends the scouts (the endpoint stops).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for profile in self.every_profile() {
            profile.stop();
        }
    }

    fn indices_of(&self, names: &[String]) -> Vec<usize> {
        (0..self.spec.servers.len())
            .filter(|&i| names.iter().any(|n| n == self.server_name(i)))
            .collect()
    }

    /// A reload is about to replace (or remove) the servers `names`: until
    /// `servers_replaced`, no scout is started for them and one that ends (its old
    /// generation stopping) is neither restarted nor taken for a failure.
    pub fn servers_replacing(&self, names: &[String]) {
        for server in self.indices_of(names) {
            self.replacing[server].store(true, Ordering::SeqCst);
        }
    }

    /// A reload replaced (or removed) the servers `names`: the endpoint's own sessions
    /// with them end and their lists are read again through their new generation (every
    /// client is told the lists changed). Client sessions' member sessions go on with the
    /// old generation until they end, as a server's own sessions do.
    pub async fn servers_replaced(&self, names: &[String]) {
        let indices = self.indices_of(names);
        if indices.is_empty() {
            return;
        }
        for profile in self.every_profile() {
            for &server in &indices {
                let mut scout = profile.scouts[server].lock().await;
                scout.handshake = None;
                scout.failed_at = None;
                if let Some(session) = scout.session.take() {
                    session.end.cancel();
                }
            }
        }
        for &server in &indices {
            self.replacing[server].store(false, Ordering::SeqCst);
            self.set_state(server, ServerState::NotStarted);
            for list in [List::Tools, List::Prompts, List::Resources] {
                self.list_changed(server, list);
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
