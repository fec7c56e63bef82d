//! Replicas behind a load balancer (`--cluster-key-file`, `--advertise-url`): a legacy
//! session's id is sealed with the cluster key and names the replica that owns it (its
//! child lives there), so whichever replica a balancer picks can tell where the session
//! lives and forward the request there. Nothing is shared but the key: no store, no
//! membership list. A request forwarded by a replica carries a sealed introduction
//! (`peer`) that outside clients cannot forge; the owner serves it and never forwards it
//! again.

mod forward;
mod peer;
mod replay;

use std::sync::Arc;
use std::time::Duration;

use crate::cluster_key::{ClusterKey, Sealer};
pub use forward::{Failure, Forwarder};
pub use peer::{Bound, Introduction, MAX_AGE as INTRODUCTION_LIFETIME, PEER_HEADER, Refused};

/// What `cli` validated for cluster mode.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub key: Arc<ClusterKey>,
    /// `--advertise-url`: this replica as the others reach it, `http://host:port`.
    pub advertise: String,
    /// `--peer-max-connections`: requests forwarded to other replicas at once (open
    /// streams included); beyond it a request gets 503.
    pub peer_max_connections: usize,
    /// `--peer-timeout`: how long connecting to another replica may take; its answer's
    /// head may take `--timeout-response` on top.
    pub peer_timeout: Duration,
    /// `--peer-max-senders`: replicas (sender identities) whose introductions are
    /// remembered to refuse a replay.
    pub peer_max_senders: usize,
    /// `--cluster-peers`: where introductions are accepted from (empty: anywhere).
    pub peers: Vec<ipnet::IpNet>,
}

impl ClusterConfig {
    /// Settings for the key text `key` (a key file's contents) with the default bounds
    /// (`--peer-max-connections` 256, `--peer-timeout` 3 s).
    pub fn with_key(key: &str, advertise: &str) -> Result<Self, String> {
        Ok(ClusterConfig {
            key: Arc::new(ClusterKey::parse(key)?),
            advertise: advertise_url(advertise)?,
            peer_max_connections: 256,
            peer_timeout: Duration::from_secs(3),
            peer_max_senders: 1024,
            peers: Vec::new(),
        })
    }
}

/// Where a sealed id says something lives.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    Me,
    Peer(String),
}

pub struct Cluster {
    pub advertise: String,
    /// `--session-max-age`: a sealed id older than this names nobody.
    session_max_age: Duration,
    sessions: Sealer,
    peers: Sealer,
    /// Which introductions from each other replica were accepted.
    replays: replay::Replays,
    /// How this replica numbers the introductions it sends.
    sequences: replay::Sequences,
    /// `--cluster-peers`.
    peer_networks: Vec<ipnet::IpNet>,
    pub forwarder: Forwarder,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("advertise", &self.advertise)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    pub fn new(
        config: &ClusterConfig,
        response_timeout: Duration,
        session_max_age: Duration,
    ) -> Self {
        Cluster {
            advertise: config.advertise.clone(),
            session_max_age,
            sessions: config.key.sealer("session-id"),
            peers: config.key.sealer("peer-introduction"),
            replays: replay::Replays::new(config.peer_max_senders, peer::MAX_AGE),
            sequences: replay::Sequences::new(),
            peer_networks: config.peers.clone(),
            forwarder: Forwarder::new(config, response_timeout),
        }
    }

    /// A session id for the random value `local`: sealed, naming this replica and when
    /// it was made.
    pub fn session_id(&self, local: &str) -> String {
        self.sessions
            .seal(format!("{}\n{}\n{local}", self.advertise, unix_now()).as_bytes())
    }

    /// Who owns the session `id`; `None` for an id this cluster did not make (forged,
    /// tampered, sealed with another key) or made longer than `--session-max-age` ago
    /// (the id names nobody then, like an unknown one, wherever it is sent). An id from
    /// before ids carried their time has no age, and is over too.
    pub fn session_owner(&self, id: &str) -> Option<Owner> {
        let plain = self.sessions.open(id)?;
        let plain = std::str::from_utf8(&plain).ok()?;
        let mut fields = plain.splitn(3, '\n');
        let (Some(owner), Some(issued), Some(_)) = (fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        let issued: u64 = issued.parse().ok()?;
        let now = unix_now();
        // A replica whose clock runs ahead may date an id a little in the future.
        if now.saturating_sub(issued) >= self.session_max_age.as_secs()
            || issued > now + CLOCK_SKEW.as_secs()
        {
            tracing::debug!("a session id past --session-max-age names nobody");
            return None;
        }
        Some(self.owner(owner))
    }

    /// Whether an introduction may come from `address` (`--cluster-peers`).
    pub fn accepts_peer(&self, address: std::net::IpAddr) -> bool {
        // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d.
        let address = address.to_canonical();
        self.peer_networks.is_empty() || self.peer_networks.iter().any(|n| n.contains(&address))
    }

    /// `owner` as seen from here.
    pub fn owner(&self, owner: &str) -> Owner {
        if owner == self.advertise {
            Owner::Me
        } else {
            Owner::Peer(owner.to_owned())
        }
    }
}

/// How far ahead of this replica's clock another's may date an id.
const CLOCK_SKEW: Duration = Duration::from_secs(60);

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// `--advertise-url` as the replicas use it: `http://host:port`, no path, no credentials.
/// Plain HTTP only: a pod address has no certificate name to check (encrypt the hop with
/// the cluster network or a mesh).
pub fn advertise_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| {
        format!("--advertise-url {text:?} is not a URL ({e}); e.g. http://10.0.0.7:8080")
    })?;
    if url.scheme() != "http" {
        return Err(format!(
            "--advertise-url {text:?}: replicas talk plain http (e.g. http://10.0.0.7:8080); encrypt that hop with the network or a mesh"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "--advertise-url {text:?} must not hold credentials"
        ));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "--advertise-url {text:?} names a replica, not an endpoint: give only http://host:port (the path is --path)"
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| format!("--advertise-url {text:?} has no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    Ok(format!("http://{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(advertise: &str, key: &str) -> Cluster {
        let config = ClusterConfig::with_key(key, advertise).unwrap();
        Cluster::new(&config, Duration::from_secs(1), Duration::from_secs(3600))
    }

    const KEY: &str = "a-cluster-key-of-more-than-thirty-two-bytes-AAAA";

    #[test]
    fn a_session_id_past_its_max_age_names_nobody_even_after_a_key_rotation() {
        let a = cluster("http://127.0.0.1:1", KEY);
        let sealed = |plain: String| a.sessions.seal(plain.as_bytes());
        let now = unix_now();
        let fresh = sealed(format!("http://127.0.0.1:1\n{}\nlocal", now - 3590));
        assert_eq!(a.session_owner(&fresh), Some(Owner::Me));
        let old = sealed(format!("http://127.0.0.1:1\n{}\nlocal", now - 3600));
        assert_eq!(a.session_owner(&old), None, "an hour old, the max age");
        let future = sealed(format!("http://127.0.0.1:1\n{}\nlocal", now + 3600));
        assert_eq!(a.session_owner(&future), None, "dated far ahead");
        let undated = sealed("http://127.0.0.1:1\nlocal".into());
        assert_eq!(
            a.session_owner(&undated),
            None,
            "made before ids had an age"
        );
        // After a rotation (new key first, the old one second) the id still opens and
        // still ages.
        let rotated_key = format!("another-cluster-key-longer-than-thirty-two-bytes-B\n{KEY}");
        let rotated = cluster("http://127.0.0.1:2", &rotated_key);
        assert_eq!(
            rotated.session_owner(&fresh),
            Some(Owner::Peer("http://127.0.0.1:1".into()))
        );
        assert_eq!(rotated.session_owner(&old), None);
    }

    #[test]
    fn a_session_id_names_its_owner_to_every_replica_and_to_nobody_else() {
        let a = cluster("http://127.0.0.1:1", KEY);
        let b = cluster("http://127.0.0.1:2", KEY);
        let id = a.session_id("0123456789abcdef");
        assert_eq!(a.session_owner(&id), Some(Owner::Me));
        assert_eq!(
            b.session_owner(&id),
            Some(Owner::Peer("http://127.0.0.1:1".into()))
        );
        assert!(!id.contains("127.0.0.1"), "clients never see the address");
        assert!(
            id.bytes().all(|b| b.is_ascii_graphic()),
            "a session id is visible ASCII"
        );
        let stranger = cluster(
            "http://127.0.0.1:1",
            "another-cluster-key-longer-than-thirty-two-bytes-B",
        );
        assert_eq!(stranger.session_owner(&id), None, "another key");
        assert_eq!(a.session_owner("0123456789abcdef0123456789abcdef"), None);
        let mut tampered = id.clone().into_bytes();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            a.session_owner(std::str::from_utf8(&tampered).unwrap()),
            None
        );
    }

    #[test]
    fn the_advertise_url_is_a_plain_http_origin() {
        assert_eq!(
            advertise_url("http://10.0.0.7:8080").unwrap(),
            "http://10.0.0.7:8080"
        );
        assert_eq!(
            advertise_url("http://pod.local").unwrap(),
            "http://pod.local:80"
        );
        assert_eq!(advertise_url("http://[::1]:9/").unwrap(), "http://[::1]:9");
        for bad in [
            "https://10.0.0.7",
            "http://u:p@10.0.0.7",
            "http://10.0.0.7/mcp",
            "10.0.0.7:8080",
            "http://10.0.0.7/?x",
        ] {
            assert!(advertise_url(bad).is_err(), "{bad}");
        }
    }
}
