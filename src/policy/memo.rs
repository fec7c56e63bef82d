//! A principal's remembered verdicts of the rules that cannot read a call's arguments. Such a
//! rule's verdict depends only on the principal, where the request goes, what it names and
//! who sends it (every function a rule may call is deterministic), so it is evaluated once
//! per distinct request of that shape and looked up afterwards; only the rules that read
//! `arguments` run per call. Bounded: at most `Limits::memo_entries` shapes per principal
//! (the memo starts over when full), and a shape whose text is longer than
//! `MAX_KEY_TEXT` is never remembered. A memo made under another policy (a reload) is
//! dropped on first use.

use std::collections::HashMap;
use std::hash::BuildHasher;

// Seeded per process; a hit still compares the whole shape, so a collision only costs a
// longer look through at most `memo_entries` shapes.
use foldhash::fast::RandomState;
use std::sync::{Arc, Mutex};

/// Bytes of text (server, endpoint, method, target, client) above which a request's shape
/// is not remembered: what a client sends (a resource URI) must not grow the memo without
/// bound.
pub const MAX_KEY_TEXT: usize = 512;

/// One rule's verdict: whether its condition held, or why it could not be evaluated.
pub type Holds = Result<bool, String>;

/// The verdicts of one request shape, one per rule of the policy in its order; `None` for a
/// rule that reads the arguments (evaluated per call).
pub type Verdicts = Arc<[Option<Holds>]>;

/// The memo a principal carries (empty when cloned: a copy is a new principal).
#[derive(Default)]
pub struct Memo {
    inner: Mutex<Shapes>,
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo::default()
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

#[derive(Default)]
struct Shapes {
    /// The policy these verdicts were made under (`Policy::id`).
    policy: u64,
    /// Keyed by the shape's hash; the shape itself is compared on every hit.
    by_hash: HashMap<u64, Vec<(Shape, Verdicts)>>,
    count: usize,
    hasher: RandomState,
}

/// What a rule without `arguments` can see of a request besides its principal.
struct Shape {
    server: String,
    endpoint: String,
    method: String,
    target: (u8, String, Option<[bool; 4]>),
    client: [String; 3],
}

/// A request's shape, borrowed: hashed and compared the same way as `Shape`, so that a hit
/// allocates nothing.
#[derive(Hash)]
pub struct ShapeRef<'a> {
    server: &'a str,
    endpoint: &'a str,
    method: &'a str,
    target: (u8, &'a str, Option<[bool; 4]>),
    client: [&'a str; 3],
}

impl<'a> ShapeRef<'a> {
    /// A request's shape (its target: a kind, the name or URI, and a tool's annotation
    /// hints as the rules see them, so that a tool whose annotations change is another
    /// shape); `None` when its text is longer than `MAX_KEY_TEXT`.
    pub fn new(
        server: &'a str,
        endpoint: &'a str,
        method: &'a str,
        target: (u8, &'a str, Option<[bool; 4]>),
        client: [&'a str; 3],
    ) -> Option<Self> {
        let shape = ShapeRef {
            server,
            endpoint,
            method,
            target,
            client,
        };
        (shape.text_len() <= MAX_KEY_TEXT).then_some(shape)
    }

    fn text_len(&self) -> usize {
        self.server.len()
            + self.endpoint.len()
            + self.method.len()
            + self.target.1.len()
            + self.client.iter().map(|s| s.len()).sum::<usize>()
    }

    fn is(&self, shape: &Shape) -> bool {
        self.server == shape.server
            && self.endpoint == shape.endpoint
            && self.method == shape.method
            && self.target.0 == shape.target.0
            && self.target.1 == shape.target.1
            && self.target.2 == shape.target.2
            && self.client.iter().zip(&shape.client).all(|(a, b)| *a == b)
    }

    fn owned(&self) -> Shape {
        Shape {
            server: self.server.to_owned(),
            endpoint: self.endpoint.to_owned(),
            method: self.method.to_owned(),
            target: (self.target.0, self.target.1.to_owned(), self.target.2),
            client: self.client.map(str::to_owned),
        }
    }
}

impl Memo {
    /// The verdicts remembered for `shape` under policy `policy`.
    pub fn get(&self, policy: u64, shape: &ShapeRef<'_>) -> Option<Verdicts> {
        let shapes = self.lock();
        if shapes.policy != policy {
            return None;
        }
        let hash = hash_of(&shapes.hasher, shape);
        let bucket = shapes.by_hash.get(&hash)?;
        bucket
            .iter()
            .find(|(s, _)| shape.is(s))
            .map(|(_, verdicts)| verdicts.clone())
    }

    /// Remembers `verdicts` for `shape` under policy `policy`, starting over when the memo
    /// was made under another policy or already holds `limit` shapes.
    pub fn put(&self, policy: u64, limit: usize, shape: &ShapeRef<'_>, verdicts: Verdicts) {
        let mut shapes = self.lock();
        if shapes.policy != policy || shapes.count >= limit {
            shapes.by_hash.clear();
            shapes.count = 0;
            shapes.policy = policy;
        }
        let hash = hash_of(&shapes.hasher, shape);
        let bucket = shapes.by_hash.entry(hash).or_default();
        // Another request of the same shape may have been evaluated meanwhile.
        if !bucket.iter().any(|(s, _)| shape.is(s)) {
            bucket.push((shape.owned(), verdicts));
            shapes.count += 1;
        }
    }

    /// How many shapes are remembered (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().count
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shapes> {
        // A panic while holding the lock leaves nothing half-written that matters here.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn hash_of(hasher: &RandomState, shape: &ShapeRef<'_>) -> u64 {
    hasher.hash_one(shape)
}
