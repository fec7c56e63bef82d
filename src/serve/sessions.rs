//! The session table: admitting a session within the bounds, finding one for a request,
//! ending one, and reaping idle and old ones.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::session::Session;

pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    max: usize,
    /// Per-user bound; `None` when there are no users (open, or one shared secret).
    per_principal: Option<usize>,
    /// `--session-max-age`.
    max_age: Duration,
}

/// Why a session could not be made.
pub enum Refused {
    /// `--max-sessions` are open.
    Full(usize),
    /// The principal already holds `--max-sessions-per-principal`.
    PrincipalFull(usize),
    /// The command could not be started.
    Spawn(String),
}

/// Why a request's session id found nothing.
pub enum Missing {
    /// Never existed, ended, or belongs to someone else (told apart from nothing, so a
    /// guess learns nothing).
    Unknown,
}

impl Sessions {
    pub fn new(max: usize, per_principal: Option<usize>, max_age: Duration) -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            max,
            per_principal,
            max_age,
        }
    }

    pub fn count(&self) -> usize {
        self.map.lock().expect("sessions lock").len()
    }

    /// Requests sent to children and not yet answered, over every session.
    pub fn pending_requests(&self) -> usize {
        self.map
            .lock()
            .expect("sessions lock")
            .values()
            .map(|s| s.pending_count())
            .sum()
    }

    /// Open sessions of handshake-era clients (the pool's children not counted).
    pub fn count_unpooled(&self) -> usize {
        self.map
            .lock()
            .expect("sessions lock")
            .values()
            .filter(|s| !s.pooled)
            .count()
    }

    /// Whether session `id` is open here (a config reload routes a session's requests to
    /// the generation of its server that holds it).
    pub fn holds(&self, id: &str) -> bool {
        self.map.lock().expect("sessions lock").contains_key(id)
    }

    /// The session `id`, if it exists and `principal` may use it.
    pub fn get(&self, id: &str, principal: Option<&str>) -> Result<Arc<Session>, Missing> {
        let session = self
            .map
            .lock()
            .expect("sessions lock")
            .get(id)
            .cloned()
            .ok_or(Missing::Unknown)?;
        if session.pooled
            || session.principal.as_deref() != principal
            || session.ended.is_cancelled()
        {
            return Err(Missing::Unknown);
        }
        if session.created.elapsed() >= self.max_age {
            // The reaper ends it within a moment; until then it is already over.
            return Err(Missing::Unknown);
        }
        Ok(session)
    }

    /// Admits a session for `principal` when `--max-sessions` and the principal's bound leave
    /// room, and makes it with `open`, all under the table's lock, so two requests never
    /// both take the last place. `open` gets nothing to say about the limits; what it
    /// returns besides the session (its child, say) is handed back.
    pub fn insert_with<T>(
        &self,
        principal: Option<&str>,
        open: impl FnOnce() -> Result<(Arc<Session>, T), Refused>,
    ) -> Result<(Arc<Session>, T), Refused> {
        let mut map = self.map.lock().expect("sessions lock");
        if map.len() >= self.max {
            return Err(Refused::Full(self.max));
        }
        if let (Some(limit), Some(owner)) = (self.per_principal, principal)
            && map
                .values()
                .filter(|s| s.principal.as_deref() == Some(owner) && !s.ended.is_cancelled())
                .count()
                >= limit
        {
            return Err(Refused::PrincipalFull(limit));
        }
        let (session, extra) = open()?;
        map.insert(session.id.clone(), session.clone());
        Ok((session, extra))
    }

    /// Takes an ended session out of the table.
    pub fn remove(&self, id: &str) {
        self.map.lock().expect("sessions lock").remove(id);
    }

    /// Ends a session (DELETE): the supervisor ends its child.
    pub fn end(&self, session: &Session) {
        session.end.cancel();
        self.remove(&session.id);
    }

    /// Ends every session and waits (bounded by twice the children's `grace`) until their
    /// children are gone.
    pub async fn end_all(&self, grace: Duration) {
        let sessions: Vec<Arc<Session>> = self
            .map
            .lock()
            .expect("sessions lock")
            .values()
            .cloned()
            .collect();
        for session in &sessions {
            session.end.cancel();
        }
        let bound = grace * 2 + Duration::from_secs(1);
        let deadline = Instant::now() + bound;
        while self.count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn idle(&self, ttl: Duration) -> Vec<Arc<Session>> {
        let now = Instant::now();
        self.map
            .lock()
            .expect("sessions lock")
            .values()
            .filter(|s| {
                s.busy.load(Ordering::Relaxed) == 0
                    && s.pending_count() == 0
                    && now.duration_since(s.idle_since()) >= ttl
            })
            .cloned()
            .collect()
    }

    /// Sessions of clients (not the pool's children) that began `--session-max-age` ago.
    fn old(&self) -> Vec<Arc<Session>> {
        self.map
            .lock()
            .expect("sessions lock")
            .values()
            .filter(|s| !s.pooled && s.created.elapsed() >= self.max_age)
            .cloned()
            .collect()
    }
}

/// Ends sessions idle for `--session-idle-ttl` (an open GET stream or a request in
/// progress counts as activity) and sessions older than `--session-max-age` (busy or not:
/// their requests in flight are answered with an error and their streams close).
pub async fn reap(sessions: &Sessions, idle_ttl: Option<Duration>) {
    let ttl = idle_ttl;
    let max_age = sessions.max_age;
    let shortest = ttl.map_or(max_age, |ttl| ttl.min(max_age));
    let every = (shortest / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    loop {
        tokio::time::sleep(every).await;
        for session in sessions.old() {
            tracing::info!(session = %short(&session.id), max_age_s = max_age.as_secs(), "session reached --session-max-age; ending it");
            sessions.end(&session);
        }
        let Some(ttl) = ttl else { continue };
        for session in sessions.idle(ttl) {
            tracing::info!(session = %short(&session.id), idle_s = ttl.as_secs_f64(), "session idle for --session-idle-ttl; ending it");
            sessions.end(&session);
        }
    }
}

/// 128 bits from the OS's CSPRNG, as 32 hex digits (visible ASCII, as sessions require).
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system random generator works");
    ::hex::encode(bytes)
}

/// A session id as logs show it: enough to tell sessions apart, not enough to use one.
pub fn short(id: &str) -> String {
    id.chars().take(8).collect()
}
