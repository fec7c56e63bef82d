//! The ids the host cancelled, remembered for a while so late upstream answers are dropped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::jsonrpc::message::IdKey;

/// Cancelled ids with their expiry. Bounded by time (`ttl`) and by count (`max_entries`,
/// oldest dropped first), so a host that cancels a lot cannot grow it without end.
pub struct CancelTracker {
    ttl: Duration,
    max_entries: usize,
    ids: HashMap<IdKey, Instant>,
}

impl CancelTracker {
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            ttl,
            max_entries,
            ids: HashMap::new(),
        }
    }

    pub fn insert(&mut self, id: IdKey, now: Instant) {
        self.sweep(now);
        if self.ids.len() >= self.max_entries
            && let Some(oldest) = self
                .ids
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(id, _)| id.clone())
        {
            self.ids.remove(&oldest);
        }
        self.ids.insert(id, now);
    }

    /// True (once) when `id` was cancelled within the TTL: the late answer is consumed.
    pub fn take(&mut self, id: &IdKey, now: Instant) -> bool {
        match self.ids.remove(id) {
            Some(at) => now.duration_since(at) < self.ttl,
            None => false,
        }
    }

    /// The host reused the id for a new request: the old cancellation no longer applies.
    pub fn forget(&mut self, id: &IdKey) {
        self.ids.remove(id);
    }

    fn sweep(&mut self, now: Instant) {
        let ttl = self.ttl;
        self.ids.retain(|_, at| now.duration_since(*at) < ttl);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> IdKey {
        IdKey::Num(n.to_string())
    }

    #[test]
    fn forgets_after_the_ttl() {
        let t0 = Instant::now();
        let mut tracker = CancelTracker::new(Duration::from_secs(60), 16);
        tracker.insert(id(1), t0);
        tracker.insert(id(2), t0);
        assert!(tracker.take(&id(1), t0 + Duration::from_secs(59)));
        assert!(
            !tracker.take(&id(1), t0 + Duration::from_secs(59)),
            "consumed on match"
        );
        assert!(!tracker.take(&id(2), t0 + Duration::from_secs(61)));
    }

    #[test]
    fn is_bounded_in_count() {
        let t0 = Instant::now();
        let mut tracker = CancelTracker::new(Duration::from_secs(60), 3);
        for n in 0..10 {
            tracker.insert(id(n), t0 + Duration::from_millis(n as u64));
        }
        assert_eq!(tracker.len(), 3);
        assert!(tracker.take(&id(9), t0 + Duration::from_secs(1)));
        assert!(!tracker.take(&id(0), t0 + Duration::from_secs(1)));
    }
}
