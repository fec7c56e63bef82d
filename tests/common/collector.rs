//! A fake OpenTelemetry collector: OTLP/HTTP protobuf on 127.0.0.1, decoding what it is sent
//! with the project's own protobuf types (opentelemetry-proto), so a test reads spans and
//! metric names as a collector would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use tokio::sync::Notify;

/// A span as the collector got it.
#[derive(Debug, Clone)]
pub struct SpanSeen {
    pub name: String,
    /// 1 internal, 2 server, 3 client.
    pub kind: i32,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub attributes: HashMap<String, String>,
    /// 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub service: String,
}

#[derive(Default)]
struct Received {
    spans: Vec<SpanSeen>,
    /// Metric names with each data point's attributes.
    metrics: Vec<(String, HashMap<String, String>)>,
    /// Every body, as sent.
    bodies: Vec<Bytes>,
    /// How many trace exports arrived.
    trace_exports: usize,
}

pub struct Collector {
    pub url: String,
    received: Arc<Mutex<Received>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Collector {
    pub async fn start() -> Self {
        Self::answering_after(Duration::ZERO).await
    }

    /// A collector that takes `delay` to answer each export (a slow or distant one).
    pub async fn answering_after(delay: Duration) -> Self {
        let received = Arc::new(Mutex::new(Received::default()));
        let changed = Arc::new(Notify::new());
        let state = (received.clone(), changed.clone());
        let app = axum::Router::new().fallback(move |uri: http::Uri, body: Bytes| {
            let (received, changed) = state.clone();
            async move {
                tokio::time::sleep(delay).await;
                let mut got = received.lock().unwrap();
                got.bodies.push(body.clone());
                if uri.path() == "/v1/traces" {
                    got.trace_exports += 1;
                    let request = ExportTraceServiceRequest::decode(body).unwrap();
                    for resource in request.resource_spans {
                        let service = resource
                            .resource
                            .as_ref()
                            .map(|r| attributes(&r.attributes))
                            .and_then(|a| a.get("service.name").cloned())
                            .unwrap_or_default();
                        for scope in resource.scope_spans {
                            for span in scope.spans {
                                got.spans.push(SpanSeen {
                                    name: span.name,
                                    kind: span.kind,
                                    trace_id: hex(&span.trace_id),
                                    span_id: hex(&span.span_id),
                                    parent_span_id: hex(&span.parent_span_id),
                                    attributes: attributes(&span.attributes),
                                    status: span.status.map_or(0, |s| s.code),
                                    service: service.clone(),
                                });
                            }
                        }
                    }
                } else if uri.path() == "/v1/metrics" {
                    let request = ExportMetricsServiceRequest::decode(body).unwrap();
                    for resource in request.resource_metrics {
                        for scope in resource.scope_metrics {
                            for metric in scope.metrics {
                                use opentelemetry_proto::tonic::metrics::v1::metric::Data;
                                if let Some(Data::Histogram(h)) = &metric.data {
                                    for point in &h.data_points {
                                        got.metrics.push((
                                            metric.name.clone(),
                                            attributes(&point.attributes),
                                        ));
                                    }
                                }
                            }
                        }
                    }
                }
                drop(got);
                changed.notify_waiters();
                ([("content-type", "application/x-protobuf")], Bytes::new())
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Collector {
            url: format!("http://{addr}"),
            received,
            changed,
            task,
        }
    }

    /// Waits (at most 20 s) until a span satisfies `wanted`.
    pub async fn span(&self, wanted: impl Fn(&SpanSeen) -> bool) -> SpanSeen {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let changed = self.changed.notified();
            if let Some(found) = self.spans().into_iter().find(|s| wanted(s)) {
                return found;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!("no such span in 20 s; got {:#?}", self.spans());
            }
        }
    }

    /// Waits (at most 20 s) for a histogram point of `name` whose attributes satisfy `wanted`.
    pub async fn metric(&self, name: &str, wanted: impl Fn(&HashMap<String, String>) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let changed = self.changed.notified();
            let found = self
                .received
                .lock()
                .unwrap()
                .metrics
                .iter()
                .any(|(n, a)| n == name && wanted(a));
            if found {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "no {name} point in 20 s; got {:#?}",
                    self.received.lock().unwrap().metrics
                );
            }
        }
    }

    /// Waits (at most 20 s) until `count` trace exports have arrived.
    pub async fn trace_exports(&self, count: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let changed = self.changed.notified();
            if self.received.lock().unwrap().trace_exports >= count {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!("fewer than {count} trace exports in 20 s");
            }
        }
    }

    pub fn spans(&self) -> Vec<SpanSeen> {
        self.received.lock().unwrap().spans.clone()
    }

    /// Every metric point received: its name and attributes.
    pub fn metric_points(&self) -> Vec<(String, HashMap<String, String>)> {
        self.received.lock().unwrap().metrics.clone()
    }

    /// Every body the collector was sent, as bytes.
    pub fn bodies(&self) -> Vec<Bytes> {
        self.received.lock().unwrap().bodies.clone()
    }
}
