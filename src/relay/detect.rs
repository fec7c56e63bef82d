//! Which era each side speaks: the host's from its first request, the upstream's from a
//! `server/discover` probe (or `--protocol-era`), cached for the life of the process.

use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Value, json};

use super::Relay;
use super::gate::Failure;
use super::upstream::{Wire, read_first_answer};
use crate::era::probe::{Verdict, classify};
use crate::era::{self, Era, MODERN_VERSION, envelope};

/// `--protocol-era`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraChoice {
    /// Probe the upstream once and adapt.
    Auto,
    /// Speak the handshake era upstream; no probe.
    Legacy,
    /// Speak 2026-07-28 upstream whatever a probe says.
    Modern,
}

/// What the upstream speaks, once known.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamEra {
    Legacy,
    Modern {
        version: String,
        /// Its DiscoverResult, when the probe got one.
        discover: Option<Value>,
    },
}

impl UpstreamEra {
    pub fn era(&self) -> Era {
        match self {
            UpstreamEra::Legacy => Era::Legacy,
            UpstreamEra::Modern { .. } => Era::Modern,
        }
    }
}

pub struct Eras {
    choice: EraChoice,
    host: OnceLock<Era>,
    upstream: Mutex<Option<UpstreamEra>>,
    probing: tokio::sync::Mutex<()>,
}

impl Eras {
    pub fn new(choice: EraChoice) -> Self {
        let known = (choice == EraChoice::Legacy).then_some(UpstreamEra::Legacy);
        Self {
            choice,
            host: OnceLock::new(),
            upstream: Mutex::new(known),
            probing: tokio::sync::Mutex::new(()),
        }
    }

    /// The host's era, once its first deciding request has arrived.
    pub fn host(&self) -> Option<Era> {
        self.host.get().copied()
    }

    /// Decides the host's era from a request, if it is the first that can: `initialize`
    /// means legacy, an enveloped request modern; `ping` decides nothing (legacy hosts may
    /// ping before initializing), and anything else is a legacy host that skipped the
    /// handshake.
    pub fn note_host_request(&self, method: &str, claims_modern: bool) -> Option<Era> {
        if let Some(era) = self.host.get() {
            return Some(*era);
        }
        let era = if claims_modern {
            Era::Modern
        } else if method == "ping" {
            return None;
        } else {
            Era::Legacy
        };
        let era = *self.host.get_or_init(|| era);
        tracing::info!(host_era = era.name(), "host protocol era");
        Some(era)
    }

    /// The upstream's era if already known.
    pub fn upstream_known(&self) -> Option<UpstreamEra> {
        self.upstream.lock().expect("era lock").clone()
    }

    /// Forgets the verdict `was` after the server answered like the other era (a
    /// redeployed server, a load balancer in front of mixed versions); the next request
    /// probes again. A forced era (`--protocol-era`) is never forgotten.
    pub fn proven_wrong(&self, was: Era, evidence: &str) {
        if self.choice != EraChoice::Auto {
            return;
        }
        let mut upstream = self.upstream.lock().expect("era lock");
        if upstream.as_ref().map(UpstreamEra::era) == Some(was) {
            tracing::info!(%evidence, "the upstream no longer answers like a {} server; probing again on the next request", was.name());
            *upstream = None;
        }
    }

    /// Records what a translation learned (the DiscoverResult fetched later).
    pub fn set_upstream(&self, era: UpstreamEra) {
        *self.upstream.lock().expect("era lock") = Some(era);
    }
}

/// The upstream's era, probing once if nobody has yet. `Ok(None)`: the probe saw no era
/// evidence (authorization refused, a server error, the network): the caller goes on in the
/// host's era for this request and a later one probes again.
pub async fn upstream_era(
    relay: &Relay,
    capabilities: &Value,
) -> Result<Option<UpstreamEra>, Failure> {
    let eras = &relay.eras;
    if let Some(known) = eras.upstream_known() {
        return Ok(Some(known));
    }
    let _one_probe = eras.probing.lock().await;
    if let Some(known) = eras.upstream_known() {
        return Ok(Some(known));
    }
    let mut version = MODERN_VERSION.to_owned();
    let mut tried = vec![];
    let verdict = loop {
        tried.push(version.clone());
        let verdict = match probe(relay, &version, capabilities).await {
            Ok(verdict) => verdict,
            Err(failure) => Verdict::Undecided(failure.message),
        };
        match verdict {
            Verdict::RetryWith(next) if !tried.contains(&next) => version = next,
            Verdict::RetryWith(_) => {
                break Verdict::Undecided("the server refused every version it listed".into());
            }
            other => break other,
        }
    };
    let era = match (verdict, eras.choice) {
        (Verdict::Modern { version, discover }, _) => UpstreamEra::Modern { version, discover },
        (_, EraChoice::Modern) => UpstreamEra::Modern {
            version: MODERN_VERSION.to_owned(),
            discover: None,
        },
        (Verdict::Legacy, _) => UpstreamEra::Legacy,
        (Verdict::NoCommonVersion(offered), _) => {
            return Err(Failure::upstream(format!(
                "the server speaks only protocol versions {offered:?}, none of which this relay implements (it speaks {MODERN_VERSION} and the handshake versions)"
            )));
        }
        (Verdict::Undecided(why), _) => {
            tracing::info!(reason = %why, "the era probe was inconclusive; relaying in the host's era");
            return Ok(None);
        }
        (Verdict::RetryWith(_), _) => unreachable!("resolved in the loop"),
    };
    let forced = if eras.choice == EraChoice::Modern {
        " (forced by --protocol-era)"
    } else {
        " (detected)"
    };
    tracing::info!("upstream protocol era: {}{forced}", era.era().name());
    eras.set_upstream(era.clone());
    Ok(Some(era))
}

/// One `server/discover` POST with modern headers and the classification of its outcome.
async fn probe(relay: &Relay, version: &str, capabilities: &Value) -> Result<Verdict, Failure> {
    let request = json!({
        "jsonrpc": "2.0",
        "id": relay.next_upstream_id("probe"),
        "method": "server/discover",
        "params": {"_meta": {
            era::META_PROTOCOL_VERSION: version,
            era::META_CLIENT_CAPABILITIES: capabilities,
            era::META_CLIENT_INFO: era::relay_info(),
        }},
    });
    let headers = modern_headers(version, "server/discover", None)?;
    let wire = Wire::Modern {
        headers: &headers,
        long_lived: false,
    };
    let body = Bytes::from(serde_json::to_vec(&request).expect("JSON serializes"));
    let posted = relay.upstream.post_as(body, &wire, true).await?;
    let status = posted.response.status().as_u16();
    let answer = read_first_answer(posted.response, relay.upstream.max_message_size())
        .await
        .ok();
    Ok(classify(status, answer.as_deref(), version))
}

/// The standard modern headers for `method`, as a `HeaderMap`.
pub fn modern_headers(
    version: &str,
    method: &str,
    params: Option<&serde_json::Map<String, Value>>,
) -> Result<HeaderMap, Failure> {
    let name = crate::era::headers::name_field(method)
        .and_then(|field| params.and_then(|p| p.get(field)))
        .and_then(Value::as_str);
    modern_headers_named(version, method, name)
}

/// [`modern_headers`] with the `Mcp-Name` value already picked out.
pub fn modern_headers_named(
    version: &str,
    method: &str,
    name: Option<&str>,
) -> Result<HeaderMap, Failure> {
    let pairs =
        crate::era::headers::standard_named(version, method, name).map_err(Failure::upstream)?;
    let mut headers = HeaderMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        insert(&mut headers, name, &value)?;
    }
    Ok(headers)
}

/// Adds one header; a value that still cannot be a header (it was encoded) is an error.
pub fn insert(headers: &mut HeaderMap, name: &str, value: &str) -> Result<(), Failure> {
    let name = http::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| Failure::upstream(format!("{name:?} cannot be an HTTP header name")))?;
    let value = http::HeaderValue::from_str(value).map_err(|_| {
        Failure::upstream(format!("the value of {name} cannot be sent as a header"))
    })?;
    headers.insert(name, value);
    Ok(())
}

/// Whether a request's params claim the modern era (used by the stdin loop).
pub fn claims_modern(params: Option<&serde_json::value::RawValue>) -> bool {
    envelope::claims_modern(params)
}
