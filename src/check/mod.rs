//! `mcp-stdio check URL`: probes a server the way the relay would reach it and reports
//! what it speaks (transport, era, server, capabilities, counts), what it asks of callers
//! (authorization discovery, the stored login), and how long each step took. The answer
//! to the first question of every bug report, in one command.

mod auth;
mod config;
mod failure;
mod frames;
pub mod report;
mod wire;

use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::{Map, Value};

use crate::era::MODERN_VERSION;
use crate::era::paging::{Pages, with_cursor};
use crate::era::probe::{Verdict, classify};
use crate::http::client::HttpClient;
pub use config::{CheckConfig, DEFAULT_MAX_PAGES, TransportChoice};
use failure::{Failed, failed, hint_for_status, unreachable, unreachable_message};
use report::{Count, Report, ServerInfo};
use wire::{Transport, Wire, WireError};

/// Runs the check; the report says whether the server answered.
pub async fn run(config: CheckConfig) -> Report {
    let started = Instant::now();
    let mut report = Report {
        url: config.url.as_str().to_owned(),
        ..Report::default()
    };
    report.auth.credential = "none";
    let outcome = probe(&config, &mut report).await;
    report.timings.total_ms = (started.elapsed().as_secs_f64() * 100_000.0).round() / 100.0;
    if let Err(Failed { error, hint }) = outcome {
        report.ok = false;
        report.error = Some(error);
        report.hint = Some(hint);
    } else {
        report.ok = true;
    }
    report
}

async fn probe(config: &CheckConfig, report: &mut Report) -> Result<(), Failed> {
    let uri = config.url.as_str().parse().map_err(|e| {
        failed(
            format!("the URL cannot be requested: {e}"),
            "give the server's endpoint, e.g. https://example.com/mcp",
        )
    })?;
    let client = HttpClient::build(&config.client, &uri)
        .map_err(|e| failed(e, "check --ca-cert and the proxy variables"))?;
    let read_timeout = config
        .client
        .read_timeout
        .unwrap_or(Duration::from_secs(30));
    // The first request goes without the credential, to learn whether one is needed.
    let mut unauthenticated = config.headers.clone();
    unauthenticated.remove(http::header::AUTHORIZATION);
    let mut wire = Wire::new(
        config.url.clone(),
        client,
        unauthenticated,
        read_timeout,
        config.max_message_size,
    )
    .map_err(|e| {
        failed(
            e,
            "give the server's endpoint, e.g. https://example.com/mcp",
        )
    })?;
    let result = speak(config, report, &mut wire).await;
    if result.is_ok() {
        count_everything(config, report, &mut wire).await;
    }
    wire.end_session().await;
    report.timings.steps = std::mem::take(&mut wire.steps);
    result
}

/// Finds the transport and the era, with credentials if the server wants them, and fills
/// in what the server says about itself.
async fn speak(config: &CheckConfig, report: &mut Report, wire: &mut Wire) -> Result<(), Failed> {
    if config.transport == TransportChoice::Sse {
        let answer = wire
            .open_sse()
            .await
            .map_err(|e| unreachable(&config.url, &e))?;
        report.transport = Some("sse");
        return handshake(report, wire, &answer).await;
    }
    let mut posted = wire
        .discover()
        .await
        .map_err(|e| unreachable(&config.url, &e))?;
    if matches!(posted.status.as_u16(), 401 | 403) {
        posted = auth::authenticate(config, report, wire, posted).await?;
    }
    let answer = posted
        .answer
        .as_ref()
        .map(|a| serde_json::to_vec(a).expect("JSON serializes"));
    match classify(posted.status.as_u16(), answer.as_deref(), MODERN_VERSION) {
        Verdict::Modern { version, discover } => {
            report.transport = Some("streamable-http");
            report.era = Some(MODERN_VERSION);
            report.protocol_version = Some(version.clone());
            wire.transport = Transport::Modern { version };
            if let Some(result) = discover {
                describe(report, &result);
            }
            Ok(())
        }
        Verdict::RetryWith(offered) => Err(failed(
            format!(
                "the server asks for protocol version {offered}, which this check does not send"
            ),
            "upgrade mcp-stdio, or ask the server's operator which versions it serves",
        )),
        Verdict::NoCommonVersion(offered) => Err(failed(
            format!("the server speaks only protocol versions this build does not: {offered:?}"),
            "upgrade mcp-stdio, or ask the server's operator which versions it serves",
        )),
        Verdict::Undecided(why) => Err(failed(
            format!("the server did not answer server/discover usefully: {why}"),
            hint_for_status(posted.status, &config.url),
        )),
        _ => legacy(config, report, wire).await,
    }
}

/// A handshake-era server: `initialize` over Streamable HTTP, or (when `--transport auto`
/// and the POST is refused as the relay's fallback rule says) over HTTP+SSE.
async fn legacy(config: &CheckConfig, report: &mut Report, wire: &mut Wire) -> Result<(), Failed> {
    let posted = wire
        .initialize()
        .await
        .map_err(|e| unreachable(&config.url, &e))?;
    let status = posted.status;
    if let Some(answer) = posted.answer.filter(|_| status.is_success()) {
        report.transport = Some("streamable-http");
        let session = posted.headers.get("mcp-session-id").cloned();
        let version = answer
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(crate::era::LATEST_LEGACY_VERSION)
            .to_owned();
        wire.transport = Transport::Session {
            id: session,
            version,
        };
        return handshake(report, wire, &answer).await;
    }
    let may_fall_back =
        config.transport == TransportChoice::Auto && matches!(status.as_u16(), 400 | 404 | 405);
    if may_fall_back {
        match wire.open_sse().await {
            Ok(answer) => {
                report.transport = Some("sse");
                return handshake(report, wire, &answer).await;
            }
            Err(WireError::Network(e)) => return Err(unreachable_message(&config.url, &e)),
            Err(WireError::Protocol(why)) if status == StatusCode::NOT_FOUND => {
                return Err(failed(
                    format!("no MCP endpoint at this URL: the POST got HTTP 404, and {why}"),
                    "check the path: MCP endpoints are often /mcp (Streamable HTTP) or /sse (HTTP+SSE)",
                ));
            }
            Err(WireError::Protocol(why)) => {
                return Err(failed(
                    format!("initialize got HTTP {status} without an MCP answer, and {why}"),
                    "check the URL is the server's MCP endpoint (often /mcp or /sse)",
                ));
            }
        }
    }
    Err(failed(
        format!(
            "initialize got HTTP {status}{} without an MCP answer",
            posted
                .content_type
                .map(|t| format!(" ({t})"))
                .unwrap_or_default()
        ),
        hint_for_status(status, &config.url),
    ))
}

/// The answer to `initialize`: the server's description, or why it refused.
async fn handshake(report: &mut Report, wire: &mut Wire, answer: &Value) -> Result<(), Failed> {
    if let Some(error) = answer.get("error") {
        return Err(failed(
            format!("the server refused initialize: {}", error_text(error)),
            "the server may need other client capabilities or a newer protocol revision; its own logs will say",
        ));
    }
    let result = answer.get("result").cloned().unwrap_or_default();
    report.era = Some("handshake");
    report.protocol_version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Transport::Session { version, .. } = &mut wire.transport
        && let Some(negotiated) = &report.protocol_version
    {
        version.clone_from(negotiated);
    }
    describe(report, &result);
    wire.notify("notifications/initialized").await;
    Ok(())
}

/// `serverInfo`, `capabilities` and `instructions` of an InitializeResult or a
/// DiscoverResult.
fn describe(report: &mut Report, result: &Value) {
    // 2026-07-28 puts it in the result's `_meta`; tolerate the old field too.
    let info = result
        .pointer("/_meta")
        .and_then(|m| m.get(crate::era::META_SERVER_INFO))
        .or_else(|| result.get("serverInfo"));
    let field = |name: &str| {
        info.and_then(|i| i.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    report.server = info.map(|_| ServerInfo {
        name: field("name"),
        version: field("version"),
        title: field("title"),
    });
    report.capabilities = result.get("capabilities").cloned();
    report.instructions = result
        .get("instructions")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
}

/// Tools, resources, resource templates and prompts: counted page by page, for what the
/// server's capabilities offer.
async fn count_everything(config: &CheckConfig, report: &mut Report, wire: &mut Wire) {
    let capabilities = report.capabilities.clone().unwrap_or_default();
    let kinds: [(&str, &str, &str, &'static str); 4] = [
        ("tools", "tools/list", "tools", "tools"),
        ("resources", "resources/list", "resources", "resources"),
        (
            "resources",
            "resources/templates/list",
            "resourceTemplates",
            "resource_templates",
        ),
        ("prompts", "prompts/list", "prompts", "prompts"),
    ];
    for (capability, method, field, label) in kinds {
        if capabilities.get(capability).is_none() {
            continue;
        }
        let count = count(config, wire, method, field).await;
        report.counts.insert(label, count);
    }
}

async fn count(config: &CheckConfig, wire: &mut Wire, method: &str, field: &str) -> Count {
    let mut count = Count::default();
    let mut pages = Pages::new(config.max_pages);
    while let Some(cursor) = pages.next_page() {
        let answer = match wire.request(method, with_cursor(Map::new(), cursor)).await {
            Ok(answer) => answer,
            Err(e) => {
                count.error = Some(e.message().to_owned());
                return count;
            }
        };
        if let Some(error) = answer.get("error") {
            count.error = Some(error_text(error));
            return count;
        }
        let items = answer
            .pointer(&format!("/result/{field}"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if count.pages == 0 {
            count.first_page = items;
        }
        count.pages += 1;
        count.total += items;
        pages.after(answer.get("result").unwrap_or(&Value::Null));
    }
    count.complete = pages.complete();
    count
}

fn error_text(error: &Value) -> String {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    format!("{message} ({code})")
}
