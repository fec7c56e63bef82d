//! Which introductions were already accepted, so a captured `mcp-stdio-peer` header is
//! accepted once. Each replica numbers the introductions it sends to each other replica
//! (`Sequences`: a random sender id drawn at start, then 1, 2, 3, … per receiver); the
//! receiver keeps, per sender, the highest number seen and which of the `WINDOW` before it
//! arrived (`Replays`). Memory grows with the number of replicas, never with the request
//! rate, so no flood of genuine forwards can fill it; a number below the window (more than
//! `WINDOW` later forwards to the same replica overtook it, far more than
//! `--peer-max-connections` allows in flight) is refused like a replay. A sender not heard
//! from for longer than an introduction lives is forgotten.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many numbers below the highest are remembered, per sender.
const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// This replica's numbering of the introductions it sends.
pub struct Sequences {
    /// Drawn at start: a restarted replica is a new sender.
    sender: String,
    next: Mutex<HashMap<String, u64>>,
}

impl Sequences {
    pub fn new() -> Self {
        let mut raw = [0u8; 8];
        aws_lc_rs::rand::fill(&mut raw).expect("the system random generator works");
        Sequences {
            sender: ::hex::encode(raw),
            next: Mutex::new(HashMap::new()),
        }
    }

    /// The next stamp (`sender.number`) for an introduction to the replica `to`.
    pub fn stamp(&self, to: &str) -> String {
        let mut next = self.next.lock().expect("sequence lock");
        let number = next.entry(to.to_owned()).or_insert(0);
        *number += 1;
        format!("{}.{number}", self.sender)
    }
}

/// Whether a stamp is new.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstUse {
    Yes,
    /// Seen before, or too far below its sender's window to tell.
    Seen,
    /// `--peer-max-senders` senders are remembered (only replicas holding the key can
    /// be one).
    Full(usize),
    /// Not `sender.number`.
    Malformed,
}

struct Window {
    highest: u64,
    /// Bit i: number `highest - i` arrived.
    seen: [u64; WORDS],
    heard: Instant,
}

impl Window {
    fn bit(&self, offset: u64) -> bool {
        self.seen[(offset / 64) as usize] & (1 << (offset % 64)) != 0
    }

    fn set(&mut self, offset: u64) {
        self.seen[(offset / 64) as usize] |= 1 << (offset % 64);
    }

    /// Moves the window up by `by` numbers.
    fn advance(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, by % 64);
        for i in (0..WORDS).rev() {
            let from = i.checked_sub(words);
            let high = from.map_or(0, |f| self.seen[f]);
            let low = from
                .and_then(|f| f.checked_sub(1))
                .map_or(0, |f| self.seen[f]);
            self.seen[i] = if bits == 0 {
                high
            } else {
                (high << bits) | (low >> (64 - bits))
            };
        }
    }
}

pub struct Replays {
    senders: Mutex<HashMap<String, Window>>,
    capacity: usize,
    /// How long a silent sender is remembered: longer than an introduction can pass the
    /// age check on either side of its time.
    remember_for: Duration,
}

impl Replays {
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Replays {
            senders: Mutex::new(HashMap::new()),
            capacity,
            remember_for: max_age * 2 + Duration::from_secs(1),
        }
    }

    /// Records the stamp `sender.number`; whether it was new.
    pub fn first_use(&self, stamp: &str) -> FirstUse {
        let Some((sender, number)) = stamp
            .split_once('.')
            .and_then(|(s, n)| Some((s, n.parse::<u64>().ok()?)))
        else {
            return FirstUse::Malformed;
        };
        let now = Instant::now();
        let mut senders = self.senders.lock().expect("replay memory lock");
        if !senders.contains_key(sender) {
            senders.retain(|_, w| now.duration_since(w.heard) < self.remember_for);
            if senders.len() >= self.capacity {
                return FirstUse::Full(self.capacity);
            }
            senders.insert(
                sender.to_owned(),
                Window {
                    highest: 0,
                    seen: [0; WORDS],
                    heard: now,
                },
            );
        }
        let window = senders.get_mut(sender).expect("inserted above");
        window.heard = now;
        if number > window.highest {
            window.advance(number - window.highest);
            window.highest = number;
            window.set(0);
            return FirstUse::Yes;
        }
        let offset = window.highest - number;
        if offset >= WINDOW || window.bit(offset) {
            return FirstUse::Seen;
        }
        window.set(offset);
        FirstUse::Yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replays() -> Replays {
        Replays::new(2, Duration::from_secs(5))
    }

    #[test]
    fn each_number_of_a_sender_passes_once_in_any_order() {
        let replays = replays();
        for n in [3, 1, 2, 70, 5, 4, 69, 200] {
            assert_eq!(replays.first_use(&format!("a.{n}")), FirstUse::Yes, "{n}");
        }
        for n in [3, 1, 2, 70, 5, 4, 69, 200] {
            assert_eq!(
                replays.first_use(&format!("a.{n}")),
                FirstUse::Seen,
                "{n} again"
            );
        }
        assert_eq!(replays.first_use("a.6"), FirstUse::Yes, "a gap fills later");
        assert_eq!(
            replays.first_use("b.3"),
            FirstUse::Yes,
            "another sender counts apart"
        );
        // Far below the window: refused, since it cannot be told from a replay.
        assert_eq!(
            replays.first_use(&format!("a.{}", 200 + WINDOW)),
            FirstUse::Yes
        );
        assert_eq!(replays.first_use("a.199"), FirstUse::Seen);
        assert_eq!(replays.first_use("a.x"), FirstUse::Malformed);
        assert_eq!(replays.first_use("nodot"), FirstUse::Malformed);
    }

    #[test]
    fn a_flood_of_genuine_numbers_takes_no_more_memory() {
        let replays = replays();
        for n in 1..=200_000u64 {
            assert_eq!(replays.first_use(&format!("a.{n}")), FirstUse::Yes);
        }
        assert_eq!(replays.first_use("a.199999"), FirstUse::Seen);
        assert_eq!(replays.senders.lock().unwrap().len(), 1);
    }

    #[test]
    fn senders_are_bounded_and_silent_ones_forgotten() {
        let replays = replays();
        assert_eq!(replays.first_use("a.1"), FirstUse::Yes);
        assert_eq!(replays.first_use("b.1"), FirstUse::Yes);
        assert_eq!(replays.first_use("c.1"), FirstUse::Full(2));
        let forgetful = Replays {
            remember_for: Duration::ZERO,
            ..replays
        };
        assert_eq!(
            forgetful.first_use("c.1"),
            FirstUse::Yes,
            "a and b were silent"
        );
    }

    #[test]
    fn the_window_moves_by_words_and_bits() {
        let mut window = Window {
            highest: 0,
            seen: [0; WORDS],
            heard: Instant::now(),
        };
        window.set(0);
        window.set(63);
        window.advance(1);
        assert!(window.bit(1) && window.bit(64) && !window.bit(0));
        window.advance(64);
        assert!(window.bit(65) && window.bit(128));
        window.advance(WINDOW);
        assert!(!window.bit(65));
    }

    #[test]
    fn stamps_count_per_receiver() {
        let sequences = Sequences::new();
        let (a1, a2, b1) = (
            sequences.stamp("a"),
            sequences.stamp("a"),
            sequences.stamp("b"),
        );
        assert!(a1.ends_with(".1") && a2.ends_with(".2") && b1.ends_with(".1"));
        assert_ne!(Sequences::new().stamp("a"), a1, "a restart is a new sender");
    }
}
