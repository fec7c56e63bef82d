//! The table of parked calls: each gets a number and a `requestState` that names it, is
//! integrity-protected (HMAC with a per-process key), bound to the method and tool or
//! prompt and to the principal that was asked, and resumes its call once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::era::state_token;

struct Entry<T> {
    call: T,
    principal: Option<String>,
}

pub struct Parked<T> {
    /// Made on first use: starting the crypto library costs tens of milliseconds, which
    /// every relay would otherwise pay at startup.
    key: std::sync::OnceLock<[u8; 32]>,
    calls: Mutex<HashMap<u64, Entry<T>>>,
    next: AtomicU64,
}

impl<T> Default for Parked<T> {
    fn default() -> Self {
        Self {
            key: std::sync::OnceLock::new(),
            calls: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        }
    }
}

impl<T> Parked<T> {
    fn key(&self) -> &[u8; 32] {
        self.key.get_or_init(|| {
            let mut key = [0u8; 32];
            aws_lc_rs::rand::fill(&mut key).expect("the system random generator works");
            key
        })
    }

    /// Parks a call for `principal`; returns its number and the `requestState` to echo.
    pub fn park(
        &self,
        call: T,
        principal: Option<String>,
        method: &str,
        name: Option<&str>,
    ) -> (u64, String) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.put_back(id, call, principal);
        (id, state_token::sign(self.key(), id, method, name))
    }

    /// Parks a call again under the number it had (its retry was malformed, and the client
    /// may try again with the same `requestState`).
    pub fn put_back(&self, id: u64, call: T, principal: Option<String>) {
        self.calls
            .lock()
            .expect("parked lock")
            .insert(id, Entry { call, principal });
    }

    /// Takes the parked call a retry's `requestState` names, if it is genuine, for this
    /// method and name, asked of this principal, and still parked. A state shown by another
    /// principal leaves the call parked for its owner.
    pub fn resume(
        &self,
        state: &str,
        principal: Option<&str>,
        method: &str,
        name: Option<&str>,
    ) -> Option<(u64, T)> {
        let id = state_token::verify(self.key(), state, method, name)?;
        let mut calls = self.calls.lock().expect("parked lock");
        if calls.get(&id)?.principal.as_deref() != principal {
            return None;
        }
        calls.remove(&id).map(|entry| (id, entry.call))
    }

    /// Takes a parked call that was never resumed (its time is up).
    pub fn expire(&self, id: u64) -> Option<T> {
        self.calls
            .lock()
            .expect("parked lock")
            .remove(&id)
            .map(|entry| entry.call)
    }

    pub fn count(&self) -> usize {
        self.calls.lock().expect("parked lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_resumes_its_call_once_and_only_for_its_principal() {
        let parked = Parked::default();
        let (_, state) = parked.park("call", Some("alice".into()), "tools/call", Some("t"));
        assert!(
            parked
                .resume(&state, Some("bob"), "tools/call", Some("t"))
                .is_none()
        );
        assert!(
            parked
                .resume(&state, None, "tools/call", Some("t"))
                .is_none()
        );
        assert!(
            parked
                .resume(&state, Some("alice"), "prompts/get", Some("t"))
                .is_none()
        );
        let tampered = format!("{state}x");
        assert!(
            parked
                .resume(&tampered, Some("alice"), "tools/call", Some("t"))
                .is_none()
        );
        assert_eq!(parked.count(), 1);
        let (_, call) = parked
            .resume(&state, Some("alice"), "tools/call", Some("t"))
            .expect("the owner resumes it");
        assert_eq!(call, "call");
        assert!(
            parked
                .resume(&state, Some("alice"), "tools/call", Some("t"))
                .is_none()
        );
    }
}
