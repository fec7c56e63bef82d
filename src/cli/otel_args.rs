//! The OpenTelemetry flags, the same for `serve` and the relay (`crate::telemetry::Settings`);
//! each also reads its standard `OTEL_*` variable, and the rest of those variables
//! (per-signal endpoints, headers, sampler, metric interval) are read as the SDK reads them.

use clap::Args;

use crate::telemetry::{Flags, Settings};

#[derive(Debug, Clone, Args)]
pub struct OtelArgs {
    /// Export traces and metrics over OTLP/HTTP (protobuf) to this collector, e.g.
    /// http://127.0.0.1:4318 (`/v1/traces` and `/v1/metrics` are added). Off when unset.
    /// docs/observability.md.
    #[arg(
        long,
        value_name = "URL",
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        hide_env_values = true
    )]
    otel_endpoint: Option<String>,

    /// `service.name` of the exported data.
    #[arg(
        long,
        value_name = "NAME",
        env = "OTEL_SERVICE_NAME",
        default_value = "mcp-stdio"
    )]
    otel_service_name: String,

    /// Spans waiting for export, at most; past it new spans are dropped (the SDK warns).
    #[arg(long, value_name = "N", env = "OTEL_BSP_MAX_QUEUE_SIZE", default_value = "2048", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    otel_queue: u64,
}

impl OtelArgs {
    /// The settings, if telemetry is on (see `Settings::read`).
    pub fn settings(&self) -> Result<Option<Settings>, String> {
        let flags = Flags {
            endpoint: self.otel_endpoint.clone(),
            service_name: self.otel_service_name.clone(),
            queue: self.otel_queue as usize,
        };
        Settings::read(&flags, |name| std::env::var(name).ok())
    }
}
