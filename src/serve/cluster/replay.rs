//! The nonces of introductions already accepted, each remembered for as long as its
//! introduction could still pass the age check, so a captured `mcp-stdio-peer` header is
//! accepted once. Every nonce lives the same time, so they leave in the order they came
//! (O(1)); at most `--peer-replay-cache` are held, and beyond that a new introduction is
//! refused rather than an old nonce forgotten early (which would let its replay through).

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether a nonce is new.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstUse {
    Yes,
    Seen,
    /// The memory is full (its bound).
    Full(usize),
}

struct Seen {
    nonces: HashSet<String>,
    /// When each nonce may be forgotten, oldest first.
    order: VecDeque<(Instant, String)>,
}

pub struct Replays {
    seen: Mutex<Seen>,
    capacity: usize,
    /// How long a nonce is remembered: longer than an introduction can pass the age check
    /// on either side of its time.
    remember_for: Duration,
}

impl Replays {
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Replays {
            seen: Mutex::new(Seen {
                nonces: HashSet::new(),
                order: VecDeque::new(),
            }),
            capacity,
            remember_for: max_age * 2 + Duration::from_secs(1),
        }
    }

    /// Records `nonce`; whether it was new.
    pub fn first_use(&self, nonce: &str) -> FirstUse {
        let now = Instant::now();
        let mut seen = self.seen.lock().expect("replay memory lock");
        while let Some((until, _)) = seen.order.front()
            && *until <= now
        {
            let (_, old) = seen.order.pop_front().expect("a front entry");
            seen.nonces.remove(&old);
        }
        if seen.nonces.contains(nonce) {
            return FirstUse::Seen;
        }
        if seen.nonces.len() >= self.capacity {
            return FirstUse::Full(self.capacity);
        }
        seen.nonces.insert(nonce.to_owned());
        seen.order
            .push_back((now + self.remember_for, nonce.to_owned()));
        FirstUse::Yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_passes_once_and_a_full_memory_refuses_instead_of_forgetting() {
        let replays = Replays::new(2, Duration::from_secs(5));
        assert_eq!(replays.first_use("a"), FirstUse::Yes);
        assert_eq!(replays.first_use("a"), FirstUse::Seen);
        assert_eq!(replays.first_use("b"), FirstUse::Yes);
        assert_eq!(replays.first_use("c"), FirstUse::Full(2));
        assert_eq!(replays.first_use("a"), FirstUse::Seen, "still remembered");
    }

    #[test]
    fn a_nonce_is_forgotten_only_after_its_introduction_is_too_old_anyway() {
        let replays = Replays::new(2, Duration::from_secs(5));
        assert_eq!(replays.remember_for, Duration::from_secs(11));
        let forgetful = Replays {
            remember_for: Duration::ZERO,
            ..replays
        };
        assert_eq!(forgetful.first_use("a"), FirstUse::Yes);
        assert_eq!(forgetful.first_use("a"), FirstUse::Yes, "past its time");
        assert_eq!(forgetful.first_use("b"), FirstUse::Yes);
        assert_eq!(forgetful.first_use("c"), FirstUse::Yes, "room again");
    }
}
