//! `mcp-stdio serve` among replicas: `--cluster-key-file`, `--advertise-url` and the
//! forwarding bounds, checked into a `ClusterConfig`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::positive_seconds;
use crate::cluster_key::ClusterKey;
use crate::serve::cluster::{ClusterConfig, advertise_url};

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// A secret file every replica shares (owner-only, a key of at least 32 bytes per
    /// line: the current one, then optionally the previous one while rotating). It seals
    /// session ids and `requestState`, and authenticates replicas to each other.
    #[arg(long, value_name = "PATH", requires = "advertise_url")]
    pub(super) cluster_key_file: Option<PathBuf>,

    /// How the other replicas reach this one directly, http://HOST:PORT (in Kubernetes,
    /// the pod IP).
    #[arg(long, value_name = "URL", requires = "cluster_key_file")]
    advertise_url: Option<String>,

    /// Most requests forwarded to other replicas at once (an open stream counts until it
    /// ends); beyond it a request gets 503.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    peer_max_connections: u64,

    /// Seconds connecting to another replica may take (it is gone after that).
    #[arg(long, value_name = "SECONDS", default_value = "3", value_parser = positive_seconds, allow_hyphen_values = true)]
    peer_timeout: Duration,

    /// Introductions (forwarded requests) remembered at once so that a captured one is
    /// refused if sent again; each is remembered 11 seconds. Beyond it a forwarded request
    /// gets 503.
    #[arg(long, value_name = "N", default_value = "100000", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    peer_replay_cache: u64,

    /// Accept forwarded requests (the mcp-stdio-peer header) only from these addresses,
    /// e.g. the pod network 10.0.0.0/8. Repeatable; without it, from anywhere.
    #[arg(long = "cluster-peers", value_name = "CIDR", num_args = 1.., requires = "cluster_key_file")]
    cluster_peers: Vec<String>,
}

/// The cluster settings; `None` without `--cluster-key-file`.
pub fn cluster_config(args: &ClusterArgs) -> Result<Option<ClusterConfig>, String> {
    let (Some(path), Some(advertise)) = (&args.cluster_key_file, &args.advertise_url) else {
        return Ok(None);
    };
    let key = ClusterKey::load(path)?;
    let peers = args
        .cluster_peers
        .iter()
        .map(|cidr| {
            cidr.parse::<ipnet::IpNet>()
                .or_else(|_| cidr.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    format!("--cluster-peers '{cidr}' is not a CIDR or an address, e.g. 10.0.0.0/8")
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(ClusterConfig {
        key: Arc::new(key),
        advertise: advertise_url(advertise)?,
        peer_max_connections: args.peer_max_connections as usize,
        peer_timeout: args.peer_timeout,
        peer_replay_cache: args.peer_replay_cache as usize,
        peers,
    }))
}
