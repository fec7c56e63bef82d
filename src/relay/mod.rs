//! Relay mode: a stdio MCP server for the host on one side, a client of the remote server
//! on the other. The tiers only ever import downward:
//!
//! 1. ground: `config`, `request`, `gate` (with `cancel`), `route`, `methods`, `input`,
//!    `tool_table`: what is pending, where an answer goes, what a method allows;
//! 2. `link/`: the upstream, whatever the transport (sessions, HTTP+SSE, streams, response
//!    reading);
//! 3. `context` (what a request's task is given), `call` (the request engine of the
//!    translated paths), `detect` (the eras), `lane` (ordered one-way POSTs);
//! 4. `paths/`: one module per pairing of eras, each owning its state;
//! 5. `dispatch` (the host's lines to the paths) and this file (the stdin loop, shutdown).

mod call;
mod cancel;
pub mod config;
mod context;
mod detect;
mod dispatch;
mod eras;
pub mod gate;
mod input;
mod lane;
pub mod link;
mod methods;
mod paths;
mod request;
mod route;
mod tool_table;

use std::sync::Arc;
use std::time::Duration;

use crate::jsonrpc::framing::LineReader;
use crate::jsonrpc::stdio::StdioModes;
use crate::jsonrpc::writer::{self, Outbox};
pub use config::RelayConfig;
use context::Ctx;
use dispatch::Relay;
use gate::{Failure, Gate};
use lane::Lane;
use link::Link;

/// Why the reader loop stopped.
enum Stop {
    EndOfInput,
    Signal(&'static str),
    OutputClosed,
    InputError(std::io::Error),
}

/// Runs the relay until stdin ends or a signal arrives; returns the process exit code.
pub async fn run(config: RelayConfig) -> i32 {
    // Dropped last: puts stdin and stdout back in blocking mode for whoever shares them.
    let mut stdio = StdioModes::default();
    let (outbox, mut writer_ended) = writer::spawn(stdio.output(), 1024);
    let mut gate = Gate::new(
        outbox.clone(),
        config.cancel_filter,
        config.cancel_ttl,
        config.max_in_flight,
    );
    if let Some(settings) = config.audit.clone() {
        match crate::audit::Auditor::start(settings) {
            // The upstream as the lines name it: no query or user info, which may hold
            // secrets.
            Ok(auditor) => {
                let mut named = config.url.clone();
                named.set_query(None);
                let _ = named.set_username("");
                let _ = named.set_password(None);
                gate = gate.with_audit(auditor, named.to_string());
            }
            Err(e) => {
                tracing::error!("{e}");
                return 1;
            }
        }
    }
    if let Some(settings) = &config.telemetry
        && let Err(e) = crate::telemetry::start(settings, crate::telemetry::Side::Client)
    {
        tracing::error!("{e}");
        return 1;
    }
    let gate = Arc::new(gate);
    let link = match Link::new(&config, gate.clone()) {
        Ok(link) => link,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    tracing::info!(upstream = %link.upstream.display_url(), "relaying stdio to Streamable HTTP");
    let relay = Relay::new(Ctx::new(config, link.clone(), gate));
    let (lane, lane_task) = Lane::spawn(link, 256);
    let started = std::time::Instant::now();
    let mut reader = LineReader::new(stdio.input(), relay.ctx.config.max_message_size);
    let mut signals = std::pin::pin!(crate::shutdown::signal());

    let stop = loop {
        tokio::select! {
            biased;
            name = &mut signals => break Stop::Signal(name),
            _ = &mut writer_ended => break Stop::OutputClosed,
            frame = reader.next() => match frame {
                Ok(Some(frame)) => dispatch::dispatch(&relay, &lane, frame).await,
                Ok(None) => break Stop::EndOfInput,
                Err(e) => break Stop::InputError(e),
            },
        }
    };
    match &stop {
        Stop::EndOfInput => tracing::debug!("stdin closed; shutting down"),
        Stop::Signal(name) => tracing::info!(signal = name, "shutting down"),
        Stop::OutputClosed => tracing::info!("stdout closed; shutting down"),
        Stop::InputError(e) => tracing::warn!(error = %e, "cannot read stdin; shutting down"),
    }
    // The host's session with us is the one with the upstream: from start to exit.
    let protocol_version = relay.ctx.link.upstream.protocol_version();
    shut_down(&relay, lane, lane_task, &outbox).await;
    relay.ctx.gate.settle_audit().await;
    let error = matches!(stop, Stop::InputError(_)).then_some("input_error");
    crate::telemetry::session_ended(started.elapsed(), protocol_version.as_deref(), error);
    crate::telemetry::shutdown().await;
    0
}

/// Lets in-flight work finish within the grace period, answers what is left, ends the
/// upstream session and flushes stdout.
async fn shut_down(
    relay: &Arc<Relay>,
    lane: Lane,
    lane_task: tokio::task::JoinHandle<()>,
    outbox: &Outbox,
) {
    let ctx = &relay.ctx;
    let grace = ctx.config.shutdown_grace;
    ctx.closing.cancel();
    drop(lane);
    relay.tasks.close();
    let finished = tokio::time::timeout(grace, async {
        relay.tasks.wait().await;
        let _ = lane_task.await;
        ctx.gate.drained().await;
    })
    .await;
    if finished.is_err() {
        tracing::info!(
            grace_s = grace.as_secs_f64(),
            "in-flight requests did not finish within the shutdown grace"
        );
    }
    let failure = Failure::upstream("the relay shut down before the upstream answered");
    ctx.gate.fail_all(&failure).await;
    ctx.link.stop_server_stream();
    ctx.link
        .upstream
        .delete_session(Duration::from_secs(2))
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(2), outbox.flush()).await;
}
