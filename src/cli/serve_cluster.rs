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

    /// Replicas (each start counts as one) whose forwarded requests are numbered and
    /// remembered so that a captured one is refused if sent again; one silent for 11
    /// seconds is forgotten. Beyond it a forwarded request from a new replica gets 503.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    peer_max_senders: u64,

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
    // An introduction is made before the connection; it must still be young on arrival.
    if args.peer_timeout >= crate::serve::cluster::INTRODUCTION_LIFETIME {
        return Err(format!(
            "--peer-timeout {} s: a forwarded request's introduction lives {} s and is made before connecting; give less, e.g. 3",
            args.peer_timeout.as_secs_f64(),
            crate::serve::cluster::INTRODUCTION_LIFETIME.as_secs()
        ));
    }
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
        peer_max_senders: args.peer_max_senders as usize,
        peers,
    }))
}
