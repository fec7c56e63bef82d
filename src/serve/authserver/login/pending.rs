//! Sign-ins sent to the identity provider and not back yet, on a single server: bounded in
//! total, per client and per peer address. Registration is open, so a full table refuses
//! the new sign-in and never evicts a live one (issue 29, item 3: otherwise anyone could
//! flush real users' sign-ins). Every entry lives the same ten minutes, so the table is
//! kept in deadline order and expiring and inserting cost O(log n).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::serve::remembered::Digest;

/// The bounds (`--login-max-pending`, `…-per-client`, `…-per-peer`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub total: usize,
    pub per_client: usize,
    pub per_peer: usize,
}

/// Which bound a refused sign-in met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    Total,
    Client,
    Peer,
}

impl Full {
    /// What the user's application shows, and what would help.
    pub fn describe(self, limits: &Limits) -> String {
        let (whose, flag, n) = match self {
            Full::Total => ("", "--login-max-pending", limits.total),
            Full::Client => (
                " for this application",
                "--login-max-pending-per-client",
                limits.per_client,
            ),
            Full::Peer => (
                " from this address",
                "--login-max-pending-per-peer",
                limits.per_peer,
            ),
        };
        format!(
            "too many sign-ins{whose} are waiting at the identity provider ({flag} {n}); finish one, or try again in a few minutes"
        )
    }

    /// The `outcome` of the log line.
    pub fn outcome(self) -> &'static str {
        match self {
            Full::Total => "login_pending_full",
            Full::Client => "login_pending_full_client",
            Full::Peer => "login_pending_full_peer",
        }
    }
}

/// Where a sign-in came from. IPv6 peers count by their /64: one host holds a whole /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey(IpAddr);

impl From<IpAddr> for PeerKey {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => PeerKey(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    PeerKey(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

struct Entry<V> {
    value: V,
    deadline: (Instant, u64),
    client: String,
    peer: PeerKey,
}

struct Table<V> {
    by_state: HashMap<Digest, Entry<V>>,
    /// Deadline (and an insertion number, for ties) → state: the oldest first.
    by_deadline: BTreeMap<(Instant, u64), Digest>,
    per_client: HashMap<String, usize>,
    per_peer: HashMap<PeerKey, usize>,
    inserted: u64,
}

pub struct PendingSignIns<V> {
    table: Mutex<Table<V>>,
    limits: Limits,
}

fn decrement<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = counts.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(key);
        }
    }
}

impl<V> Table<V> {
    fn remove(&mut self, state: &Digest) -> Option<Entry<V>> {
        let entry = self.by_state.remove(state)?;
        self.by_deadline.remove(&entry.deadline);
        decrement(&mut self.per_client, &entry.client);
        decrement(&mut self.per_peer, &entry.peer);
        Some(entry)
    }

    fn expire(&mut self, now: Instant) {
        while let Some((&(deadline, _), &state)) = self.by_deadline.first_key_value() {
            if deadline > now {
                break;
            }
            self.remove(&state);
        }
    }
}

impl<V> PendingSignIns<V> {
    pub fn new(limits: Limits) -> Self {
        PendingSignIns {
            table: Mutex::new(Table {
                by_state: HashMap::new(),
                by_deadline: BTreeMap::new(),
                per_client: HashMap::new(),
                per_peer: HashMap::new(),
                inserted: 0,
            }),
            limits,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Remembers a sign-in for `lives`, unless a bound is met.
    pub fn insert(
        &self,
        state: Digest,
        value: V,
        client: &str,
        peer: IpAddr,
        lives: Duration,
    ) -> Result<(), Full> {
        let now = Instant::now();
        let peer = PeerKey::from(peer);
        let mut table = self.table.lock().expect("pending sign-ins lock");
        table.expire(now);
        if table.by_state.len() >= self.limits.total {
            return Err(Full::Total);
        }
        if table.per_client.get(client).copied().unwrap_or(0) >= self.limits.per_client {
            return Err(Full::Client);
        }
        if table.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.per_peer {
            return Err(Full::Peer);
        }
        table.inserted += 1;
        let deadline = (now + lives, table.inserted);
        table.by_deadline.insert(deadline, state);
        *table.per_client.entry(client.to_owned()).or_default() += 1;
        *table.per_peer.entry(peer).or_default() += 1;
        let entry = Entry {
            value,
            deadline,
            client: client.to_owned(),
            peer,
        };
        if let Some(old) = table.by_state.insert(state, entry) {
            // A random state never repeats; if it did, the newer one stands alone.
            table.by_deadline.remove(&old.deadline);
            decrement(&mut table.per_client, &old.client);
            decrement(&mut table.per_peer, &old.peer);
        }
        Ok(())
    }

    /// The sign-in `state` names, removed (used once), if it is not over.
    pub fn take(&self, state: &Digest) -> Option<V> {
        let mut table = self.table.lock().expect("pending sign-ins lock");
        let entry = table.remove(state)?;
        (Instant::now() < entry.deadline.0).then_some(entry.value)
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize, usize) {
        let table = self.table.lock().unwrap();
        (
            table.by_state.len(),
            table.by_deadline.len(),
            table.per_client.values().sum(),
            table.per_peer.values().sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_MINUTES: Duration = Duration::from_secs(600);

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn table() -> PendingSignIns<u32> {
        PendingSignIns::new(Limits {
            total: 6,
            per_client: 4,
            per_peer: 3,
        })
    }

    #[test]
    fn a_full_peer_or_client_is_refused_and_nothing_live_is_evicted() {
        let pending = table();
        pending
            .insert([0; 32], 0, "victim", ip("10.0.0.7"), TEN_MINUTES)
            .unwrap();
        for n in 1..=3u8 {
            pending
                .insert([n; 32], n.into(), "attacker", ip("10.0.0.66"), TEN_MINUTES)
                .unwrap();
        }
        assert_eq!(
            pending.insert([9; 32], 9, "another", ip("10.0.0.66"), TEN_MINUTES),
            Err(Full::Peer),
            "one address, any client"
        );
        pending
            .insert([4; 32], 4, "attacker", ip("10.0.0.67"), TEN_MINUTES)
            .unwrap();
        assert_eq!(
            pending.insert([9; 32], 9, "attacker", ip("10.0.0.68"), TEN_MINUTES),
            Err(Full::Client),
            "one client, any address"
        );
        pending
            .insert([5; 32], 5, "other", ip("10.0.0.69"), TEN_MINUTES)
            .unwrap();
        assert_eq!(
            pending.insert([9; 32], 9, "fresh", ip("10.0.0.70"), TEN_MINUTES),
            Err(Full::Total)
        );
        assert_eq!(pending.take(&[9; 32]), None, "nothing refused was kept");
        assert_eq!(
            pending.take(&[0; 32]),
            Some(0),
            "the victim's sign-in is live"
        );
        assert_eq!(pending.take(&[0; 32]), None, "once");
        pending
            .insert([9; 32], 9, "fresh", ip("10.0.0.70"), TEN_MINUTES)
            .expect("a finished sign-in makes room");
        assert_eq!(pending.counts(), (6, 6, 6, 6));
    }

    #[test]
    fn ipv6_peers_count_by_their_64_and_mapped_v4_as_v4() {
        let pending = table();
        for n in 1..=3u8 {
            let address = ip(&format!("2001:db8:1:2::{n}"));
            pending
                .insert([n; 32], 0, &n.to_string(), address, TEN_MINUTES)
                .unwrap();
        }
        assert_eq!(
            pending.insert([9; 32], 0, "x", ip("2001:db8:1:2:ffff::1"), TEN_MINUTES),
            Err(Full::Peer)
        );
        pending
            .insert([4; 32], 0, "x", ip("2001:db8:1:3::1"), TEN_MINUTES)
            .unwrap();
        assert_eq!(
            PeerKey::from(ip("::ffff:10.0.0.1")),
            PeerKey::from(ip("10.0.0.1"))
        );
    }

    #[test]
    fn expired_sign_ins_leave_and_free_their_counts() {
        let pending = table();
        for n in 1..=3u8 {
            pending
                .insert([n; 32], 0, "c", ip("10.0.0.1"), Duration::ZERO)
                .unwrap();
        }
        assert_eq!(pending.take(&[1; 32]), None, "over");
        pending
            .insert([4; 32], 4, "c", ip("10.0.0.1"), TEN_MINUTES)
            .expect("the expired ones made room");
        assert_eq!(pending.counts(), (1, 1, 1, 1));
    }
}
