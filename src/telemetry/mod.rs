//! OpenTelemetry: a span and a duration metric per MCP operation, named as the MCP semantic
//! conventions name them, exported over OTLP/HTTP (protobuf) by the SDK's batch processor
//! and periodic reader. Off by default; when off nothing here runs past one atomic load.
//! Installed once per process (`start`), as the OpenTelemetry API itself is global; the
//! modes open operations (`operation.rs`) from the facts their audit records already hold.

mod exporter_client;
mod operation;
mod settings;

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};

pub use operation::{Operation, Side, trace_id_of};
pub use settings::{Flags, Settings};

use crate::trace_context::TraceContext;

/// How long an export may take before it is given up (the collector is down or slow).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// At exit, how long the last spans and metrics may take to leave.
const FLUSH_WITHIN: Duration = Duration::from_secs(3);

/// The process's exporters and instruments.
pub struct Telemetry {
    tracer: Option<SdkTracer>,
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
    /// `mcp.server.operation.duration` (serve) or `mcp.client.operation.duration` (relay).
    duration: Option<Histogram<f64>>,
    /// `mcp.server.session.duration` (serve) or `mcp.client.session.duration` (relay).
    session_duration: Option<Histogram<f64>>,
    side: Side,
}

static INSTALLED: OnceLock<Telemetry> = OnceLock::new();

/// The installed telemetry, if it is on.
pub fn installed() -> Option<&'static Telemetry> {
    INSTALLED.get()
}

/// Starts the exporters (`settings`: see `Settings::read`) for a process on `side`; must
/// run inside the tokio runtime, whose threads carry the exports.
pub fn start(settings: &Settings, side: Side) -> Result<(), String> {
    let runtime = tokio::runtime::Handle::current();
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    let mut tracer_provider = None;
    if let Some(endpoint) = &settings.traces {
        let client =
            exporter_client::ExporterClient::new(endpoint, runtime.clone(), EXPORT_TIMEOUT)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.to_string())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot start the OTLP span exporter: {e}"))?;
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(settings.queue)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build();
        tracer_provider = Some(
            SdkTracerProvider::builder()
                .with_span_processor(processor)
                .with_resource(resource.clone())
                .build(),
        );
    }
    let mut meter_provider = None;
    if let Some(endpoint) = &settings.metrics {
        let client = exporter_client::ExporterClient::new(endpoint, runtime, EXPORT_TIMEOUT)?;
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.to_string())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot start the OTLP metric exporter: {e}"))?;
        meter_provider = Some(
            SdkMeterProvider::builder()
                .with_periodic_exporter(exporter)
                .with_resource(resource)
                .build(),
        );
    }
    let scope = concat!("mcp-stdio/", env!("CARGO_PKG_VERSION"));
    let tracer = tracer_provider.as_ref().map(|p| p.tracer(scope));
    // The conventions' advice for both: fine below a second, coarse up to minutes.
    let histogram = |name: &'static str, description: &'static str| {
        meter_provider.as_ref().map(|p| {
            p.meter(scope)
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(vec![
                    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                ])
                .build()
        })
    };
    let duration = histogram(
        side.duration_metric(),
        "MCP request duration as observed by mcp-stdio",
    );
    let session_duration = histogram(
        side.session_metric(),
        "MCP session duration as observed by mcp-stdio",
    );
    let telemetry = Telemetry {
        tracer,
        tracer_provider,
        meter_provider,
        duration,
        session_duration,
        side,
    };
    INSTALLED
        .set(telemetry)
        .map_err(|_| "OpenTelemetry was started twice".to_owned())?;
    tracing::info!(
        traces = settings.traces.as_ref().map(|u| u.to_string()),
        metrics = settings.metrics.as_ref().map(|u| u.to_string()),
        "exporting OpenTelemetry over OTLP/HTTP"
    );
    Ok(())
}

/// A session ended after `lasted`: the session duration metric, with the protocol version
/// it spoke (when known) and `error_type` when it ended by a failure (its server exited).
pub fn session_ended(lasted: Duration, protocol_version: Option<&str>, error_type: Option<&str>) {
    let Some(histogram) = installed().and_then(|t| t.session_duration.as_ref()) else {
        return;
    };
    // serve's sessions are its HTTP clients'; the relay's is the one with its upstream.
    let mut attributes = vec![
        opentelemetry::KeyValue::new("network.transport", "tcp"),
        opentelemetry::KeyValue::new("network.protocol.name", "http"),
    ];
    if let Some(version) = protocol_version.and_then(operation::known_version) {
        attributes.push(opentelemetry::KeyValue::new(
            "mcp.protocol.version",
            version,
        ));
    }
    if let Some(error) = error_type {
        attributes.push(opentelemetry::KeyValue::new("error.type", error.to_owned()));
    }
    histogram.record(lasted.as_secs_f64(), &attributes);
}

/// At exit: the spans and metrics not yet sent are exported (at most a few seconds).
pub async fn shutdown() {
    let Some(telemetry) = installed() else { return };
    let tracer_provider = telemetry.tracer_provider.clone();
    let meter_provider = telemetry.meter_provider.clone();
    // The SDK's shutdown blocks its caller until its export thread is done, and that
    // thread's exports run on this runtime: off the runtime's own threads, then.
    let flushed = tokio::task::spawn_blocking(move || {
        if let Some(provider) = tracer_provider {
            let _ = provider.shutdown_with_timeout(FLUSH_WITHIN);
        }
        if let Some(provider) = meter_provider {
            let _ = provider.shutdown_with_timeout(FLUSH_WITHIN);
        }
    });
    if tokio::time::timeout(FLUSH_WITHIN * 2, flushed)
        .await
        .is_err()
    {
        tracing::warn!("the last OpenTelemetry data was not all exported before exit");
    }
}

/// The trace context a hop after this one should carry: the current operation's span
/// (run inside it with `FutureExt::with_context`), with the `tracestate` and `baggage` of
/// what came in. `None` when telemetry is off or no operation of ours is current.
pub fn outgoing(incoming: Option<&TraceContext>) -> Option<TraceContext> {
    installed()?.tracer.as_ref()?;
    let context = opentelemetry::Context::current();
    let span = context.span();
    let span_context = span.span_context();
    if !span_context.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        span_context.trace_id(),
        span_context.span_id(),
        span_context.trace_flags().to_u8()
    );
    TraceContext::from_parts(
        &traceparent,
        incoming.and_then(|t| t.tracestate.as_deref()),
        incoming.and_then(|t| t.baggage.as_deref()),
    )
}
