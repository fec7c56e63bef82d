//! One client session's own sessions with the aggregate endpoint's servers: each opened on
//! the first request routed to it (not at `initialize`), given the client's handshake
//! (its capabilities and name, so the server sees who asks), and opened again when one
//! ended (a child that exited, a session reaped for idleness) without the client noticing.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};

use super::endpoint::Endpoint;
use super::scout;
use crate::serve::session::Session;

pub struct MemberSessions {
    principal: Option<String>,
    pooled: bool,
    opened: Mutex<Vec<Option<Arc<Session>>>>,
    /// One opening per server at a time.
    opening: Vec<tokio::sync::Mutex<()>>,
    /// The `initialize` params each server is given (the client's, at the negotiated
    /// version).
    hello: Mutex<Value>,
    /// The client's last `logging/setLevel`, for servers opened after it.
    log_level: Mutex<Option<Value>>,
    /// The client's session ended: a session opened after that is ended at once.
    closed: std::sync::atomic::AtomicBool,
}

impl MemberSessions {
    pub fn new(servers: usize, principal: Option<String>, pooled: bool) -> Self {
        MemberSessions {
            principal,
            pooled,
            opened: Mutex::new(vec![None; servers]),
            opening: (0..servers).map(|_| tokio::sync::Mutex::new(())).collect(),
            hello: Mutex::new(json!({
                "protocolVersion": crate::era::LATEST_LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": crate::era::relay_info(),
            })),
            log_level: Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The client's `initialize` params, with the version the endpoint answered.
    pub fn remember_hello(&self, mut params: Value, version: &str) {
        if params.is_object() {
            params["protocolVersion"] = Value::String(version.to_owned());
            *self.hello.lock().expect("hello lock") = params;
        }
    }

    pub fn remember_level(&self, params: Value) {
        *self.log_level.lock().expect("level lock") = Some(params);
    }

    /// The member sessions open now.
    pub fn open_ones(&self) -> Vec<(usize, Arc<Session>)> {
        self.opened
            .lock()
            .expect("members lock")
            .iter()
            .enumerate()
            .filter_map(|(server, s)| s.clone().map(|s| (server, s)))
            .filter(|(_, s)| !s.ended.is_cancelled())
            .collect()
    }

    pub fn get_open(&self, server: usize) -> Option<Arc<Session>> {
        self.opened.lock().expect("members lock")[server]
            .clone()
            .filter(|s| !s.ended.is_cancelled())
    }

    /// The session with `server`: the one open, or one opened and given its handshake
    /// now (`opened` is told of a new one, to follow what it says outside requests).
    pub async fn get(
        &self,
        endpoint: &Arc<Endpoint>,
        server: usize,
        opened: impl FnOnce(Arc<Session>),
    ) -> Result<Arc<Session>, String> {
        if let Some(session) = self.get_open(server) {
            return Ok(session);
        }
        let _one_at_a_time = self.opening[server].lock().await;
        if let Some(session) = self.get_open(server) {
            return Ok(session);
        }
        let name = endpoint.server_name(server);
        let session = endpoint
            .members()
            .open(name, self.principal.clone(), self.pooled)
            .map_err(|why| {
                format!(
                    "the server {name:?} behind this endpoint could not be given a session: {why}"
                )
            })?;
        if let Err(why) = self.handshake(endpoint, &session).await {
            session.end.cancel();
            endpoint.mark_down(server, why.clone());
            return Err(format!(
                "the server {name:?} behind this endpoint is unavailable ({why}); the endpoint's other servers go on"
            ));
        }
        {
            let mut opened = self.opened.lock().expect("members lock");
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                drop(opened);
                session.end.cancel();
                return Err("the session ended".into());
            }
            opened[server] = Some(session.clone());
        }
        opened(session.clone());
        Ok(session)
    }

    async fn handshake(&self, endpoint: &Endpoint, session: &Session) -> Result<(), String> {
        let wait = endpoint.flags.timeout;
        let hello = self.hello.lock().expect("hello lock").clone();
        scout::request(session, "initialize", "initialize", hello, wait).await?;
        let initialized =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        session
            .backend
            .send(initialized, wait)
            .await
            .map_err(|_| "the server stopped reading after its handshake".to_owned())?;
        let level = self.log_level.lock().expect("level lock").clone();
        if let Some(level) = level
            && let Err(why) =
                scout::request(session, "level", "logging/setLevel", level, wait).await
        {
            tracing::debug!("logging/setLevel for a new member session: {why}");
        }
        Ok(())
    }

    /// Ends every member session (the client's session ended).
    pub fn end_all(&self) {
        let mut opened = self.opened.lock().expect("members lock");
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        for session in opened.iter_mut() {
            if let Some(session) = session.take() {
                session.end.cancel();
            }
        }
    }
}
