//! What a backend says outside any request: numbered events kept for a handshake-era
//! session's GET stream (replayed from `Last-Event-ID`), and a pooled backend's
//! list-changed and resource-updated notifications for `subscriptions/listen`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::{Notify, broadcast};

pub struct ServerEvents {
    /// The session's id as logs show it.
    name: String,
    outbound: Mutex<Outbound>,
    /// Woken by a new event, a new GET stream (the older one ends), and the session's end.
    pub changed: Notify,
    dropped: AtomicU64,
    /// A pooled backend's change notifications, for the gateway's `subscriptions/listen`.
    pub changes: broadcast::Sender<Bytes>,
}

/// The GET stream's events: numbered per session, the newest kept for `Last-Event-ID`.
struct Outbound {
    events: VecDeque<(u64, Bytes)>,
    next_id: u64,
    capacity: usize,
    /// Bumped by every new GET; an older stream sees it and ends, so each event goes out
    /// on one stream only.
    generation: u64,
}

impl ServerEvents {
    /// `replay` (`--replay-buffer`) events are kept; it also bounds how far a slow listen
    /// may fall behind before it is ended to resync.
    pub fn new(name: String, replay: usize) -> Self {
        ServerEvents {
            name,
            outbound: Mutex::new(Outbound {
                events: VecDeque::new(),
                next_id: 1,
                capacity: replay,
                generation: 0,
            }),
            changed: Notify::new(),
            dropped: AtomicU64::new(0),
            changes: broadcast::channel(replay.max(1)).0,
        }
    }

    /// Keeps one event for the GET stream, dropping the oldest past `--replay-buffer`.
    pub fn push(&self, line: Bytes) {
        let mut outbound = self.outbound.lock().expect("events lock");
        let id = outbound.next_id;
        outbound.next_id += 1;
        outbound.events.push_back((id, line));
        if outbound.events.len() > outbound.capacity {
            outbound.events.pop_front();
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(session = %self.name, dropped, "the GET stream's replay buffer is full (--replay-buffer); the oldest events were dropped");
            }
        }
        drop(outbound);
        self.changed.notify_waiters();
    }

    /// A change notification for whoever listens (nobody may be: then nothing happens).
    pub fn change(&self, line: Bytes) {
        let _ = self.changes.send(line);
    }

    /// A new GET stream: its generation, and where it starts (after `last_event_id`, or
    /// at the oldest kept event).
    pub fn open_stream(&self, last_event_id: Option<u64>) -> (u64, u64) {
        let mut outbound = self.outbound.lock().expect("events lock");
        outbound.generation += 1;
        let oldest = outbound
            .events
            .front()
            .map_or(outbound.next_id, |(id, _)| *id);
        let from = match last_event_id {
            Some(last) => (last + 1).max(oldest),
            None => outbound.next_id, // a fresh stream gets what comes from now on
        };
        let generation = outbound.generation;
        drop(outbound);
        self.changed.notify_waiters(); // an older stream ends
        (generation, from)
    }

    /// The events from `from` on, if the stream of `generation` is still the current one.
    pub fn events_from(&self, generation: u64, from: u64) -> Option<Vec<(u64, Bytes)>> {
        let outbound = self.outbound.lock().expect("events lock");
        if outbound.generation != generation {
            return None;
        }
        Some(
            outbound
                .events
                .iter()
                .filter(|(id, _)| *id >= from)
                .cloned()
                .collect(),
        )
    }
}
