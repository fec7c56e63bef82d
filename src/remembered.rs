//! What was decided about a token, remembered by the token's SHA-256 (the token itself is
//! never kept) until a deadline of its own, in a map of bounded size: when it is full,
//! the entries past their deadline go first, then any one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub type Digest = [u8; 32];

pub fn digest(token: &str) -> Digest {
    let hash = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    Digest::try_from(hash.as_ref()).expect("SHA-256 is 32 bytes")
}

pub struct Remembered<V> {
    entries: Mutex<HashMap<Digest, (V, Instant)>>,
    capacity: usize,
}

impl<V: Clone> Remembered<V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// Whether anything is remembered at all (`--oauth-token-cache 0`: nothing).
    pub fn is_enabled(&self) -> bool {
        self.capacity > 0
    }

    /// The value for `key`, if its deadline has not passed.
    pub fn get(&self, key: &Digest) -> Option<V> {
        let entries = self.entries.lock().expect("cache lock");
        let (value, until) = entries.get(key)?;
        (Instant::now() < *until).then(|| value.clone())
    }

    /// Remembers `value` for `key` for `lives`.
    pub fn insert(&self, key: Digest, value: V, lives: Duration) {
        if self.capacity == 0 {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().expect("cache lock");
        if entries.len() >= self.capacity {
            entries.retain(|_, (_, until)| now < *until);
        }
        if entries.len() >= self.capacity
            && let Some(any) = entries.keys().next().copied()
        {
            entries.remove(&any);
        }
        entries.insert(key, (value, now + lives));
    }

    /// Forgets `key`.
    pub fn forget(&self, key: &Digest) {
        self.entries.lock().expect("cache lock").remove(key);
    }

    /// Forgets every entry whose value is `doomed` (a revoked grant's tokens), and only
    /// those: one client revoking its own grants must not send everyone back to the store.
    pub fn forget_where(&self, doomed: impl Fn(&V) -> bool) {
        self.entries
            .lock()
            .expect("cache lock")
            .retain(|_, (value, _)| !doomed(value));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().expect("cache lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_touches_only_what_it_names() {
        let remembered = Remembered::new(10);
        for n in 0..4u8 {
            remembered.insert([n; 32], n % 2, Duration::from_secs(60));
        }
        remembered.forget_where(|v| *v == 1);
        assert_eq!(remembered.len(), 2);
        assert_eq!(remembered.get(&[0; 32]), Some(0));
        assert_eq!(remembered.get(&[1; 32]), None);
        remembered.forget(&[0; 32]);
        assert_eq!(remembered.get(&[0; 32]), None);
        assert_eq!(remembered.get(&[2; 32]), Some(0));
    }

    #[test]
    fn it_stays_within_its_bound_and_forgets_at_the_deadline() {
        let remembered = Remembered::new(2);
        for n in 0..5u8 {
            remembered.insert([n; 32], n, Duration::from_secs(60));
        }
        assert_eq!(remembered.len(), 2);
        remembered.insert([9; 32], 9, Duration::ZERO);
        assert_eq!(remembered.get(&[9; 32]), None);
        let off = Remembered::new(0);
        off.insert([1; 32], 1, Duration::from_secs(60));
        assert!(!off.is_enabled());
        assert_eq!(off.get(&[1; 32]), None);
    }
}
