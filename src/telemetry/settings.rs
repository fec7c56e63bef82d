//! Where OpenTelemetry data goes, read from the standard `OTEL_*` environment variables and
//! our flags: the OTLP/HTTP endpoints of traces and metrics, or nothing (off, the default).
//! Pure: the environment is a function given by the caller.

use http::Uri;

/// What the exporters are told; `None` from `Settings::read` when telemetry is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where spans are posted (`…/v1/traces`); `None`: no traces.
    pub traces: Option<Uri>,
    /// Where metrics are posted (`…/v1/metrics`); `None`: no metrics.
    pub metrics: Option<Uri>,
    /// `service.name` of the resource.
    pub service_name: String,
    /// Spans waiting for export, at most (past it they are dropped and counted).
    pub queue: usize,
}

/// The flags' part (each flag also reads its standard variable).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--otel-endpoint` / `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL.
    pub endpoint: Option<String>,
    /// `--otel-service-name` / `OTEL_SERVICE_NAME`.
    pub service_name: String,
    /// `--otel-queue` / `OTEL_BSP_MAX_QUEUE_SIZE`.
    pub queue: usize,
}

impl Settings {
    /// Reads the settings: off unless an endpoint is named (or when `OTEL_SDK_DISABLED` is
    /// `true`); `Err` names what is wrong and what would work.
    pub fn read(
        flags: &Flags,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Settings>, String> {
        let env = |name: &str| {
            env(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let base = flags
            .endpoint
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty());
        let traces = signal(&env, base, "TRACES", "traces")?;
        let metrics = signal(&env, base, "METRICS", "metrics")?;
        if traces.is_none() && metrics.is_none() {
            return Ok(None);
        }
        Ok(Some(Settings {
            traces,
            metrics,
            service_name: flags.service_name.clone(),
            queue: flags.queue,
        }))
    }
}

/// One signal's endpoint: its own variable, else the base URL with `/v1/{path}`; none when
/// its exporter is `none`.
fn signal(
    env: &impl Fn(&str) -> Option<String>,
    base: Option<&str>,
    upper: &str,
    path: &str,
) -> Result<Option<Uri>, String> {
    let exporter_var = format!("OTEL_{upper}_EXPORTER");
    match env(&exporter_var).as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(None),
        Some(other) => {
            return Err(format!(
                "{exporter_var}={other}: mcp-stdio exports over OTLP only; use `otlp` or `none`"
            ));
        }
    }
    let protocol_var = format!("OTEL_EXPORTER_OTLP_{upper}_PROTOCOL");
    let protocol = env(&protocol_var).or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol.as_deref() {
        None | Some("http/protobuf") => {}
        Some(other) => {
            return Err(format!(
                "OTLP protocol {other}: mcp-stdio sends http/protobuf only; set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and point the endpoint at the collector's HTTP port (4318)"
            ));
        }
    }
    let endpoint_var = format!("OTEL_EXPORTER_OTLP_{upper}_ENDPOINT");
    let url = match (env(&endpoint_var), base) {
        (Some(own), _) => own,
        (None, Some(base)) => format!("{}/v1/{path}", base.trim_end_matches('/')),
        (None, None) => return Ok(None),
    };
    checked(&url).map(Some)
}

/// An endpoint URL: http or https, a host, no user information (a credential in a URL
/// would be in every error that names it; use OTEL_EXPORTER_OTLP_HEADERS).
fn checked(url: &str) -> Result<Uri, String> {
    let parsed = url::Url::parse(url).map_err(|e| {
        format!("the OTLP endpoint is not a URL ({e}); give one like http://127.0.0.1:4318")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "the OTLP endpoint {} is not http(s)://HOST…; give one like http://127.0.0.1:4318",
            parsed.scheme()
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("the OTLP endpoint holds user information; put credentials in OTEL_EXPORTER_OTLP_HEADERS instead".into());
    }
    url.parse()
        .map_err(|_| "the OTLP endpoint is not a URI; give one like http://127.0.0.1:4318".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(endpoint: Option<&str>) -> Flags {
        Flags {
            endpoint: endpoint.map(str::to_owned),
            service_name: "mcp-stdio".into(),
            queue: 2048,
        }
    }

    fn read(endpoint: Option<&str>, vars: &[(&str, &str)]) -> Result<Option<Settings>, String> {
        Settings::read(&flags(endpoint), |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn off_unless_an_endpoint_is_named_or_when_disabled() {
        assert_eq!(read(None, &[]), Ok(None));
        assert_eq!(
            read(Some("http://c:4318"), &[("OTEL_SDK_DISABLED", "true")]),
            Ok(None)
        );
        let on = read(Some("http://c:4318/"), &[]).unwrap().unwrap();
        assert_eq!(on.traces.unwrap().to_string(), "http://c:4318/v1/traces");
        assert_eq!(on.metrics.unwrap().to_string(), "http://c:4318/v1/metrics");
    }

    #[test]
    fn a_signals_own_endpoint_and_exporter_win() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/spans"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ];
        let on = read(None, &vars).unwrap().unwrap();
        assert_eq!(on.traces.unwrap().to_string(), "http://t:1/spans");
        assert_eq!(on.metrics, None);
    }

    #[test]
    fn what_cannot_be_sent_is_refused_saying_what_works() {
        let grpc = read(
            Some("http://c:4317"),
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
        );
        assert!(grpc.unwrap_err().contains("http/protobuf"));
        let console = read(
            Some("http://c:4318"),
            &[("OTEL_TRACES_EXPORTER", "console")],
        );
        assert!(console.unwrap_err().contains("`otlp` or `none`"));
        let secret = read(Some("http://user:hunter2@c:4318"), &[]).unwrap_err();
        assert!(secret.contains("OTEL_EXPORTER_OTLP_HEADERS") && !secret.contains("hunter2"));
        assert!(
            read(Some("ftp://c"), &[])
                .unwrap_err()
                .contains("http://127.0.0.1:4318")
        );
    }
}
