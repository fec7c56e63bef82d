//! `AggregateBackend`: a client session at the aggregate endpoint, driven over the backend
//! seam like a stdio child. Requests are registered and sent as to any backend; each is
//! answered by the endpoint itself (`initialize`, the merged lists, `ping`,
//! `logging/setLevel`) or carried to the one server its name or URI leads to
//! (`relay.rs`). The client's notifications and answers go to the server they belong to.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::endpoint::Endpoint;
use super::members::MemberSessions;
use super::profile::Profile;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::message::{self, IdKey, Kind};
use crate::serve::aggregate::ids::{Questions, Running};
use crate::serve::aggregate::route::{List, Target};
use crate::serve::backend::{Backend, Conflict, Event, Named, Owner, Undeliverable, send_all};
use crate::serve::server_events::ServerEvents;

struct Pending {
    body: Bytes,
    waiters: Vec<mpsc::Sender<Event>>,
}

/// What a session's tasks share.
pub(super) struct Inner {
    pub endpoint: Arc<Endpoint>,
    pub name: String,
    pub pooled: bool,
    pending: Mutex<HashMap<IdKey, Pending>>,
    max_pending: usize,
    /// The session's own events (its GET stream, or a pooled session's listens).
    pub events: Arc<ServerEvents>,
    pub members: MemberSessions,
    /// Which server runs each of the client's requests (for its cancellation).
    pub running: Mutex<Running>,
    /// The servers' questions, under the endpoint's ids.
    pub questions: Mutex<Questions>,
    /// Calls cancelled while their server's session was opening: never sent.
    pub cancelled: Mutex<std::collections::HashSet<IdKey>>,
    /// `--timeout-response`: the longest wait for a server to take a message.
    pub response_timeout: Duration,
    /// Fired when the session ends: its tasks stop.
    pub ended: CancellationToken,
    /// The lists this session's client sees (set by its `initialize`).
    profile: Mutex<Arc<Profile>>,
}

pub struct AggregateBackend {
    inner: Arc<Inner>,
}

impl AggregateBackend {
    pub fn new(
        endpoint: Arc<Endpoint>,
        name: String,
        principal: Option<String>,
        pooled: bool,
        events: Arc<ServerEvents>,
        max_pending: usize,
        response_timeout: Duration,
    ) -> Self {
        let servers = endpoint.spec.servers.len();
        let endpoint_for_profile = endpoint.clone();
        let inner = Arc::new(Inner {
            members: MemberSessions::new(servers, principal, pooled),
            endpoint,
            name,
            pooled,
            pending: Mutex::new(HashMap::new()),
            max_pending,
            events,
            running: Mutex::new(Running::default()),
            // As many unanswered questions as requests may be in flight.
            questions: Mutex::new(Questions::new(max_pending)),
            cancelled: Mutex::default(),
            response_timeout,
            ended: CancellationToken::new(),
            profile: Mutex::new(endpoint_for_profile.profile(&Value::Null)),
        });
        inner.clone().follow_endpoint();
        AggregateBackend { inner }
    }

    /// The session ended: its member sessions and tasks end too.
    pub fn end(&self) {
        self.inner.ended.cancel();
        self.inner.members.end_all();
    }
}

impl Inner {
    /// Hands `event` to whoever waits for `id`; an answer (or failure) ends the wait.
    pub fn deliver(&self, id: &IdKey, event: Event) {
        let mut pending = self.pending.lock().expect("aggregate lock");
        let last = !matches!(event, Event::Message(_));
        let waiters = if last {
            pending.remove(id).map(|p| p.waiters)
        } else {
            pending.get(id).map(|p| p.waiters.clone())
        };
        drop(pending);
        send_all(&waiters.unwrap_or_default(), event);
    }

    /// The server running the client's request `id`, and the client's open session with it.
    fn running_on(&self, id: &IdKey) -> Option<(usize, Arc<crate::serve::session::Session>)> {
        let server = self.running.lock().expect("running lock").server_of(id)?;
        Some((server, self.members.get_open(server)?))
    }

    pub fn is_waited_for(&self, id: &IdKey) -> bool {
        self.pending
            .lock()
            .expect("aggregate lock")
            .contains_key(id)
    }

    fn answer(&self, id: &IdKey, raw_id: &str, result: &Value) {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{result}}}"#);
        self.deliver(id, Event::Answer(Bytes::from(line)));
    }

    pub fn refuse(&self, id: &IdKey, raw_id: &str, code: i64, message: &str) {
        let line = error_response(raw_id, code, message, None);
        self.deliver(id, Event::Answer(Bytes::from(line)));
    }

    /// Something for the client outside any request: its GET stream, or a pooled
    /// session's listens.
    pub fn tell(&self, line: Bytes) {
        if self.pooled {
            self.events.change(line);
        } else {
            self.events.push(line);
        }
    }

    /// The endpoint's own notifications (a list changed) reach this session's client.
    fn follow_endpoint(self: Arc<Self>) {
        let mut changes = self.endpoint.changes.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(line) => self.tell(line),
                        // Some were missed: every list may have changed.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            for list in ["tools", "prompts", "resources"] {
                                let line = format!(r#"{{"jsonrpc":"2.0","method":"notifications/{list}/list_changed"}}"#);
                                self.tell(Bytes::from(line));
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                    () = self.ended.cancelled() => return,
                }
            }
        });
    }

    /// One request of the client's.
    async fn request(
        self: Arc<Self>,
        id: IdKey,
        raw_id: String,
        method: String,
        params: Option<Value>,
    ) {
        match method.as_str() {
            "initialize" => {
                let asked = params
                    .as_ref()
                    .and_then(|p| p.get("protocolVersion"))
                    .and_then(Value::as_str)
                    .unwrap_or(crate::era::LATEST_LEGACY_VERSION);
                let capabilities = params.as_ref().and_then(|p| p.get("capabilities"));
                let profile = self.endpoint.profile(capabilities.unwrap_or(&Value::Null));
                *self.profile.lock().expect("profile lock") = profile.clone();
                match self.endpoint.initialize_result(&profile, asked).await {
                    Ok(result) => {
                        let version = result["protocolVersion"].as_str().unwrap_or_default();
                        self.members
                            .remember_hello(params.unwrap_or(Value::Null), version);
                        self.answer(&id, &raw_id, &result);
                    }
                    Err(why) => self.refuse(&id, &raw_id, INTERNAL_ERROR, &why),
                }
                return;
            }
            "ping" => return self.answer(&id, &raw_id, &json!({})),
            "logging/setLevel" => return self.set_level(&id, &raw_id, params).await,
            _ => {}
        }
        let needs = match method.as_str() {
            "tools/call" => &[List::Tools][..],
            "prompts/get" => &[List::Prompts],
            "completion/complete" => &[List::Prompts],
            "tools/list" => &[List::Tools],
            "prompts/list" => &[List::Prompts],
            "resources/list" => &[List::Resources],
            "resources/templates/list" => &[List::ResourceTemplates],
            _ => &[],
        };
        let profile = self.profile.lock().expect("profile lock").clone();
        let listing = method.ends_with("/list");
        if let Err(why) = self.endpoint.read_lists(&profile, needs, listing).await {
            return self.refuse(&id, &raw_id, INTERNAL_ERROR, &why);
        }
        match profile.route(&method, params.as_ref()) {
            None => self.refuse(
                &id,
                &raw_id,
                METHOD_NOT_FOUND,
                &format!("Method not found: {method} is not served at an aggregate endpoint"),
            ),
            Some(Err(unroutable)) => {
                // A name of a server that is down says so, rather than that it is unknown.
                let name = params
                    .as_ref()
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str);
                match name.and_then(|name| self.endpoint.down_server_of(name)) {
                    Some(why) => self.refuse(&id, &raw_id, INTERNAL_ERROR, &why),
                    None => self.refuse(&id, &raw_id, INVALID_PARAMS, &unroutable.0),
                }
            }
            Some(Ok(Target::Merged(list))) => {
                self.list(&profile, &id, &raw_id, list, params.as_ref())
            }
            Some(Ok(Target::Every)) => self.answer(&id, &raw_id, &json!({})),
            Some(Ok(Target::One { server, params })) => {
                self.forward(id, raw_id, method, server, params).await;
            }
        }
    }

    fn list(
        &self,
        profile: &Profile,
        id: &IdKey,
        raw_id: &str,
        list: List,
        params: Option<&Value>,
    ) {
        let cursor = params.and_then(|p| p.get("cursor")).and_then(Value::as_str);
        match profile.page(list, cursor, self.endpoint.flags.page_size) {
            Ok((items, next)) => {
                let mut result = json!({ list.key(): items });
                if let Some(next) = next {
                    result["nextCursor"] = Value::String(next);
                }
                self.answer(id, raw_id, &result);
            }
            Err(why) => self.refuse(id, raw_id, INVALID_PARAMS, why.message()),
        }
    }

    /// `logging/setLevel`: to every server the client has a session with now, and to
    /// those opened later.
    async fn set_level(&self, id: &IdKey, raw_id: &str, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        self.members.remember_level(params.clone());
        let wait = self.endpoint.flags.timeout;
        let sessions = self.members.open_ones();
        let asks = sessions.iter().map(|(_, session)| {
            super::scout::request(session, "level", "logging/setLevel", params.clone(), wait)
        });
        for (result, (server, _)) in futures_util::future::join_all(asks)
            .await
            .into_iter()
            .zip(&sessions)
        {
            if let Err(why) = result {
                tracing::debug!(server = %self.endpoint.server_name(*server), "logging/setLevel: {why}");
            }
        }
        self.answer(id, raw_id, &json!({}));
    }

    /// A notification or an answer from the client.
    fn heard_from_client(&self, parsed: &message::Message<'_>, line: Bytes) {
        match parsed.kind {
            Kind::Response => self.answer_question(parsed),
            Kind::Notification => match parsed.method.as_deref() {
                Some("notifications/cancelled") => {
                    let Some(id) = message::cancelled_request_id(parsed.params) else {
                        return;
                    };
                    let server = self.running.lock().expect("running lock").server_of(&id);
                    match server.and_then(|s| self.members.get_open(s).map(|m| (s, m))) {
                        Some((server, session)) => {
                            tracing::debug!(session = %self.name, %id, server = %self.endpoint.server_name(server), "a cancellation, to the server that runs the call");
                            session.backend.send_now(line);
                        }
                        None if server.is_some() => {
                            // Its server's session is still opening: it is never sent.
                            tracing::debug!(session = %self.name, %id, "a cancellation of a call not sent yet");
                            self.cancelled.lock().expect("cancelled lock").insert(id);
                        }
                        None => {
                            tracing::debug!(session = %self.name, %id, "a cancellation of no call in progress; dropped");
                        }
                    }
                }
                Some("notifications/initialized") => {}
                Some(method) => {
                    // Roots changed, and whatever else a client tells every server.
                    tracing::debug!(session = %self.name, method, "a client notification for every open server");
                    for (_, session) in self.members.open_ones() {
                        session.backend.send_now(line.clone());
                    }
                }
                None => {}
            },
            Kind::Request => {}
        }
    }

    /// The client's answer to a server's question: to the server that asked, under its
    /// own id.
    fn answer_question(&self, parsed: &message::Message<'_>) {
        let Some(id) = parsed.id.and_then(IdKey::from_raw) else {
            return;
        };
        let Some((server, asked_as)) = self.questions.lock().expect("questions lock").answered(&id)
        else {
            tracing::debug!(session = %self.name, %id, "an answer to no question the servers asked; dropped");
            return;
        };
        let Some(session) = self.members.get_open(server) else {
            return;
        };
        // The server's own id as it wrote it (a re-encoded number may not match).
        let answer = match (parsed.result, parsed.error) {
            (Some(result), _) => format!(
                r#"{{"jsonrpc":"2.0","id":{asked_as},"result":{}}}"#,
                result.get()
            ),
            (None, Some(error)) => format!(
                r#"{{"jsonrpc":"2.0","id":{asked_as},"error":{}}}"#,
                error.get()
            ),
            (None, None) => return,
        };
        session.backend.send_now(Bytes::from(answer));
    }
}

impl Backend for AggregateBackend {
    fn register(
        &self,
        id: IdKey,
        body: &Bytes,
        _progress: Option<String>,
        waiter: mpsc::Sender<Event>,
    ) -> Result<bool, Conflict> {
        let mut pending = self.inner.pending.lock().expect("aggregate lock");
        if let Some(existing) = pending.get_mut(&id) {
            if existing.body != *body {
                return Err(Conflict::DifferentRequest);
            }
            existing.waiters.push(waiter);
            return Ok(false);
        }
        if pending.len() >= self.inner.max_pending {
            return Err(Conflict::Full);
        }
        pending.insert(
            id,
            Pending {
                body: body.clone(),
                waiters: vec![waiter],
            },
        );
        Ok(true)
    }

    fn send(
        &self,
        line: Bytes,
        _wait: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<(), Undeliverable>> + Send + '_>> {
        Box::pin(async move {
            if self.inner.ended.is_cancelled() {
                return Err(Undeliverable::Gone);
            }
            self.send_now(line);
            Ok(())
        })
    }

    fn send_now(&self, line: Bytes) {
        let Ok(parsed) = message::parse(&line) else {
            return;
        };
        if parsed.kind != Kind::Request {
            self.inner.heard_from_client(&parsed, line.clone());
            return;
        }
        let (Some(raw), Some(method)) = (parsed.id, parsed.method.as_deref()) else {
            return;
        };
        let Some(id) = IdKey::from_raw(raw) else {
            return;
        };
        let params = parsed
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok());
        let task = self
            .inner
            .clone()
            .request(id, raw.get().to_owned(), method.to_owned(), params);
        tokio::spawn(task);
    }

    fn forget(&self, id: &IdKey) {
        self.inner
            .pending
            .lock()
            .expect("aggregate lock")
            .remove(id);
        // The server's session stops waiting too (its carrying task then ends), or the
        // call would hold one of that session's request slots for good.
        if let Some((_, session)) = self.inner.running_on(id) {
            session.backend.forget(id);
        }
    }

    fn set_asking(&self, id: &IdKey, asking: bool) {
        if let Some((_, session)) = self.inner.running_on(id) {
            session.backend.set_asking(id, asking);
        }
    }

    fn pending_count(&self) -> usize {
        self.inner.pending.lock().expect("aggregate lock").len()
    }

    fn fail_all(&self, why: &str) {
        let pending: Vec<Pending> = self
            .inner
            .pending
            .lock()
            .expect("aggregate lock")
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in pending {
            for waiter in p.waiters {
                let _ = waiter.try_send(Event::Failed(why.to_owned()));
            }
        }
        self.end();
    }

    fn stands_for_several(&self) -> bool {
        true
    }

    fn owner_of(&self, named: Named, public: &str) -> Owner {
        let profile = self.inner.profile.lock().expect("profile lock").clone();
        match profile.owner_of(named, public) {
            Some((server, name)) => Owner::Member {
                server: self.inner.endpoint.server_name(server).to_owned(),
                name,
            },
            None => Owner::Unknown,
        }
    }
}
