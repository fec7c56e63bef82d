//! The upstream's era found by evidence: one `server/discover` probe judged as §4.15 of the
//! wire spec says (cached in `eras`), and the modern request headers every path sends.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Value, json};

use crate::era::probe::{Verdict, classify};
use crate::era::{self, MODERN_VERSION, envelope};
use crate::relay::config::EraChoice;
use crate::relay::context::Ctx;
use crate::relay::eras::UpstreamEra;
use crate::relay::gate::Failure;
use crate::relay::link::response::read_first_answer;
use crate::relay::link::session::Wire;

/// The upstream's era, probing once if nobody has yet. `Ok(None)`: the probe saw no era
/// evidence (authorization refused, a server error, the network): the caller goes on in the
/// host's era for this request and a later one probes again. `for_modern_host`: the probe
/// is the first POST of a 2026-07-28 host, so (under `--transport auto`) a refusal is also
/// the evidence that decides the transport; a legacy host's `initialize` decides it itself.
pub async fn upstream_era(
    ctx: &Ctx,
    capabilities: &Value,
    for_modern_host: bool,
) -> Result<Option<UpstreamEra>, Failure> {
    let eras = &ctx.eras;
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
        let verdict = match probe(ctx, &version, capabilities, for_modern_host).await {
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
        (Verdict::Modern { version, discover }, _) => UpstreamEra::Modern {
            version,
            discover: discover.map(std::sync::Arc::new),
        },
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
async fn probe(
    ctx: &Ctx,
    version: &str,
    capabilities: &Value,
    for_modern_host: bool,
) -> Result<Verdict, Failure> {
    let request = json!({
        "jsonrpc": "2.0",
        "id": ctx.next_upstream_id("probe"),
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
    let posted = ctx.link.upstream.post_as(body, &wire, true).await?;
    // `--transport auto`: a refused probe may be the first sign of an HTTP+SSE server (its
    // POST URL is the stream's); such a server is of the handshake era by definition.
    if for_modern_host && ctx.link.learn_transport(posted.response.status()).await {
        return Ok(Verdict::Legacy);
    }
    let status = posted.response.status().as_u16();
    let answer = read_first_answer(posted.response, ctx.link.upstream.max_message_size())
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
    let mut headers = HeaderMap::with_capacity(pairs.len() + 2);
    for (name, value) in pairs {
        // The standard names are constants: no parsing or copying on every request.
        let name = match name {
            crate::era::headers::PROTOCOL_VERSION => PROTOCOL_VERSION_HEADER,
            crate::era::headers::METHOD => METHOD_HEADER,
            crate::era::headers::NAME => NAME_HEADER,
            other => {
                insert(&mut headers, other, &value)?;
                continue;
            }
        };
        let value = http::HeaderValue::try_from(value).map_err(|_| {
            Failure::upstream(format!("the value of {name} cannot be sent as a header"))
        })?;
        headers.insert(name, value);
    }
    Ok(headers)
}

const PROTOCOL_VERSION_HEADER: http::HeaderName =
    http::HeaderName::from_static(crate::era::headers::PROTOCOL_VERSION);
const METHOD_HEADER: http::HeaderName = http::HeaderName::from_static(crate::era::headers::METHOD);
const NAME_HEADER: http::HeaderName = http::HeaderName::from_static(crate::era::headers::NAME);

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
