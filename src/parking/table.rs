//! The table of parked calls: each gets a number and a `requestState` that names it, is
//! integrity-protected (HMAC with a per-process key), bound to the method and tool or
//! prompt and to the principal that was asked, and resumes its call once. Among replicas
//! (`Sealing`) the state is also sealed with the cluster key around the name of the
//! replica that holds the call, so any replica can tell where a retry must go.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::era::state_token;

struct Entry<T> {
    call: T,
    principal: Option<String>,
}

/// Among replicas: the sealer for states and this replica's name in them.
pub struct Sealing {
    pub sealer: crate::cluster_key::Sealer,
    pub owner: String,
}

pub struct Parked<T> {
    sealing: Option<Sealing>,
    /// Made on first use: starting the crypto library costs tens of milliseconds, which
    /// every relay would otherwise pay at startup.
    key: std::sync::OnceLock<[u8; 32]>,
    calls: Mutex<HashMap<u64, Entry<T>>>,
    next: AtomicU64,
}

impl<T> Default for Parked<T> {
    fn default() -> Self {
        Self {
            sealing: None,
            key: std::sync::OnceLock::new(),
            calls: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        }
    }
}

impl<T> Parked<T> {
    /// A table whose states are sealed and name `sealing.owner`.
    pub fn sealed(sealing: Sealing) -> Self {
        Self {
            sealing: Some(sealing),
            ..Self::default()
        }
    }

    /// The replica a sealed state names (`None`: not sealed by this cluster, or the table
    /// does not seal).
    pub fn owner(&self, state: &str) -> Option<String> {
        let sealing = self.sealing.as_ref()?;
        let plain = String::from_utf8(sealing.sealer.open(state)?).ok()?;
        plain.split_once('\n').map(|(owner, _)| owner.to_owned())
    }

    /// The inner, HMAC-signed state a state given to a client carries (itself when the
    /// table does not seal); `None` for a sealed state that names another replica.
    fn unwrap<'s>(&self, state: &'s str) -> Option<std::borrow::Cow<'s, str>> {
        let Some(sealing) = &self.sealing else {
            return Some(std::borrow::Cow::Borrowed(state));
        };
        let plain = String::from_utf8(sealing.sealer.open(state)?).ok()?;
        let (owner, inner) = plain.split_once('\n')?;
        (owner == sealing.owner).then(|| std::borrow::Cow::Owned(inner.to_owned()))
    }

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
        let state = state_token::sign(self.key(), id, method, name);
        let state = match &self.sealing {
            Some(sealing) => sealing
                .sealer
                .seal(format!("{}\n{state}", sealing.owner).as_bytes()),
            None => state,
        };
        (id, state)
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
        let state = self.unwrap(state)?;
        let id = state_token::verify(self.key(), &state, method, name)?;
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
    fn a_sealed_state_names_its_replica_and_resumes_only_there() {
        let key = crate::cluster_key::ClusterKey::parse(
            "a-cluster-key-of-more-than-thirty-two-bytes-AAAA",
        )
        .unwrap();
        let here = Parked::sealed(Sealing {
            sealer: key.sealer("request-state"),
            owner: "http://10.0.0.1:80".into(),
        });
        let there: Parked<&str> = Parked::sealed(Sealing {
            sealer: key.sealer("request-state"),
            owner: "http://10.0.0.2:80".into(),
        });
        let (_, state) = here.park("call", None, "tools/call", Some("t"));
        assert!(!state.contains("10.0.0.1"), "clients never see the address");
        assert_eq!(there.owner(&state).as_deref(), Some("http://10.0.0.1:80"));
        assert_eq!(there.resume(&state, None, "tools/call", Some("t")), None);
        let unsealed: Parked<&str> = Parked::default();
        assert_eq!(unsealed.owner(&state), None);
        assert_eq!(here.owner("mcp-stdio.1.1.AAAA"), None, "an unsealed state");
        assert_eq!(
            here.resume(&state, None, "tools/call", Some("t")),
            Some((1, "call"))
        );
    }

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
