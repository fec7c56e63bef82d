//! Carrying one of the client's requests to the server it is routed to, and what comes
//! back: the request's progress and log lines with their tokens untouched, the server's
//! questions under the endpoint's ids (so two servers' ids never meet at the client), its
//! answer with resource URIs published. What a member session says outside any request
//! reaches the client's own stream the same way.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::backend::Inner;
use super::endpoint::changed_list;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_REQUEST};
use crate::jsonrpc::message::{self, IdKey, Kind};
use crate::serve::backend::{Conflict, Event, request_progress_token};
use crate::serve::session::Session;

/// The results whose resource URIs are the server's own and must be published.
fn carries_uris(method: &str) -> bool {
    matches!(method, "tools/call" | "resources/read" | "prompts/get")
}

impl Inner {
    /// Sends request `id` (`method` with the server's own `params`) to `server` and
    /// delivers what comes back until its answer.
    pub async fn forward(
        self: Arc<Self>,
        id: IdKey,
        raw_id: String,
        method: String,
        server: usize,
        params: Value,
    ) {
        if self.ended.is_cancelled() {
            return;
        }
        // From here on a cancellation knows where the call goes.
        self.running
            .lock()
            .expect("running lock")
            .start(id.clone(), server);
        if let Some(session) = self.session_for(&id, &raw_id, server).await {
            self.send_and_carry(&id, &raw_id, &method, server, &params, &session)
                .await;
        }
        self.running.lock().expect("running lock").end(&id);
        self.cancelled.lock().expect("cancelled lock").remove(&id);
    }

    /// The client's session with `server` for request `id`; `None` when the request was
    /// answered instead (the server is unavailable, or the call was cancelled meanwhile).
    async fn session_for(
        self: &Arc<Self>,
        id: &IdKey,
        raw_id: &str,
        server: usize,
    ) -> Option<Arc<Session>> {
        let follower = self.clone();
        let opened = move |session: Arc<Session>| follower.follow_member(server, session);
        let session = self.members.get(&self.endpoint, server, opened).await;
        if self.cancelled.lock().expect("cancelled lock").remove(id) {
            self.refuse(
                id,
                raw_id,
                INTERNAL_ERROR,
                "the request was cancelled before its server was reached",
            );
            return None;
        }
        match session {
            // The client gave up while the server's session was opening: never sent.
            Ok(_) if !self.is_waited_for(id) => None,
            Ok(session) => Some(session),
            Err(why) => {
                self.refuse(id, raw_id, INTERNAL_ERROR, &why);
                None
            }
        }
    }

    /// Registers and sends the request to the server's session and carries its events.
    async fn send_and_carry(
        &self,
        id: &IdKey,
        raw_id: &str,
        method: &str,
        server: usize,
        params: &Value,
        session: &Session,
    ) {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"method":{},"params":{params}}}"#,
            Value::String(method.to_owned())
        );
        let line = Bytes::from(line);
        let raw_params = serde_json::value::to_raw_value(params).ok();
        let progress = request_progress_token(raw_params.as_deref());
        let (tx, mut rx) = mpsc::channel(64);
        let first = match session.backend.register(id.clone(), &line, progress, tx) {
            Ok(first) => first,
            Err(Conflict::DifferentRequest) => {
                return self.refuse(id, raw_id, INVALID_REQUEST, &format!("Conflict: request id {raw_id} is already in flight with a different request"));
            }
            Err(Conflict::Full) => {
                return self.refuse(id, raw_id, INTERNAL_ERROR, &format!("Too Many Requests: the server {:?} has its most requests in flight for this session (its max_requests_per_session)", self.endpoint.server_name(server)));
            }
        };
        session
            .busy
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The same request already running there (a client's retry): wait for its answer.
        let sent = match first {
            true => session.backend.send(line, self.response_timeout).await,
            false => Ok(()),
        };
        if let Err(why) = sent {
            session.backend.forget(id);
            let why = format!(
                "the server {:?} behind this endpoint did not take the request ({why:?}); try again",
                self.endpoint.server_name(server)
            );
            self.refuse(id, raw_id, INTERNAL_ERROR, &why);
        } else {
            self.carry(id, method, server, session, &mut rx).await;
        }
        session
            .busy
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        session.touch();
    }

    /// Delivers the request's events until its answer (or until nobody waits for it).
    async fn carry(
        &self,
        id: &IdKey,
        method: &str,
        server: usize,
        session: &Session,
        rx: &mut mpsc::Receiver<Event>,
    ) {
        loop {
            let event = tokio::select! {
                event = rx.recv() => event,
                () = self.ended.cancelled() => None,
            };
            match event {
                Some(Event::Message(line)) => {
                    if let Some(line) = self.heard_from_server(server, line) {
                        self.deliver(id, Event::Message(line));
                    }
                }
                Some(Event::Answer(line)) => {
                    let line = if carries_uris(method) {
                        self.publish_answer(server, line)
                    } else {
                        line
                    };
                    self.deliver(id, Event::Answer(line));
                    return;
                }
                Some(Event::Failed(why)) => {
                    let why = format!(
                        "the server {:?} behind this endpoint: {why}",
                        self.endpoint.server_name(server)
                    );
                    self.deliver(id, Event::Failed(why));
                    return;
                }
                None => {
                    session.backend.forget(id);
                    return;
                }
            }
            if !self.is_waited_for(id) {
                session.backend.forget(id);
                return;
            }
        }
    }

    fn publish_answer(&self, server: usize, line: Bytes) -> Bytes {
        // Most answers hold no URI: not worth a parse (results can be large).
        if memchr::memmem::find(&line, b"\"uri\"").is_none() {
            return line;
        }
        let Ok(mut answer) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        let Some(result) = answer.get_mut("result") else {
            return line;
        };
        self.endpoint.publish_uris(server, result);
        Bytes::from(answer.to_string())
    }

    /// A message from `server` for the client: its questions renamed, its resource
    /// updates published, its list changes noted (`None`: nothing to pass on).
    fn heard_from_server(&self, server: usize, line: Bytes) -> Option<Bytes> {
        let parsed = message::parse(&line).ok()?;
        match parsed.kind {
            Kind::Request => {
                let asked_as = parsed.id?.get().to_owned();
                let id = self
                    .questions
                    .lock()
                    .expect("questions lock")
                    .ask(server, &asked_as);
                let method = Value::String(parsed.method.as_deref()?.to_owned());
                let question = match parsed.params {
                    Some(params) => format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":{method},"params":{}}}"#,
                        params.get()
                    ),
                    None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method}}}"#),
                };
                Some(Bytes::from(question))
            }
            Kind::Notification if parsed.method.as_deref() == Some("notifications/cancelled") => {
                // The server withdraws its own question: under the id the client knows.
                let asked_as = serde_json::from_str::<Value>(parsed.params?.get()).ok()?;
                let asked_as = serde_json::to_string(asked_as.get("requestId")?).ok()?;
                let id = self
                    .questions
                    .lock()
                    .expect("questions lock")
                    .withdrawn(server, &asked_as)?;
                Some(Bytes::from(format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
                )))
            }
            Kind::Notification => {
                if let Some(list) = changed_list(&line) {
                    // The endpoint tells every client once its list is read again.
                    self.endpoint.list_changed(server, list);
                    return None;
                }
                if parsed.method.as_deref() == Some("notifications/resources/updated") {
                    let mut update: Value = serde_json::from_slice(&line).ok()?;
                    if let Some(uri) = update["params"]["uri"].as_str() {
                        update["params"]["uri"] =
                            Value::String(self.endpoint.publish_uri(server, uri));
                    }
                    return Some(Bytes::from(update.to_string()));
                }
                Some(line)
            }
            Kind::Response => None,
        }
    }

    /// What a member session says outside any request reaches the client's stream.
    fn follow_member(self: Arc<Self>, server: usize, session: Arc<Session>) {
        tokio::spawn(async move {
            let mut changes = session.events.changes.subscribe();
            let (generation, mut cursor) = session.events.open_stream(None);
            loop {
                let notified = session.events.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                match session.events.events_from(generation, cursor) {
                    Some(events) => {
                        for (number, line) in events {
                            cursor = number + 1;
                            if let Some(line) = self.heard_from_server(server, line) {
                                self.tell(line);
                            }
                        }
                    }
                    None => return,
                }
                tokio::select! {
                    () = &mut notified => {}
                    change = changes.recv() => {
                        if let Ok(line) = change && let Some(line) = self.heard_from_server(server, line) {
                            self.tell(line);
                        }
                    }
                    () = session.ended.cancelled() => return,
                    () = self.ended.cancelled() => return,
                }
            }
        });
    }
}
