//! The HTTP client the OTLP exporters post with: the data path's own hyper client (no
//! reqwest), its requests run on the process's tokio runtime, because the SDK's batch
//! processor and metric reader call it from threads of their own.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::HttpError;
use tokio::runtime::Handle;

use crate::http::client::{ClientOptions, HttpClient};

/// The most of a collector's answer kept (it says only whether the export was taken).
const MAX_ANSWER: usize = 64 * 1024;

/// Posts OTLP requests to one collector.
pub struct ExporterClient {
    client: HttpClient,
    runtime: Handle,
    timeout: Duration,
}

impl std::fmt::Debug for ExporterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExporterClient").finish_non_exhaustive()
    }
}

impl ExporterClient {
    /// A client for `endpoint`'s origin (redirects not followed: an export goes where it
    /// was told, or fails).
    pub fn new(endpoint: &http::Uri, runtime: Handle, timeout: Duration) -> Result<Self, String> {
        let options = ClientOptions {
            connect_timeout: timeout,
            read_timeout: Some(timeout),
            extra_roots: Vec::new(),
        };
        Ok(ExporterClient {
            client: HttpClient::build(&options, endpoint)?.without_redirects(),
            runtime,
            timeout,
        })
    }
}

#[async_trait]
impl opentelemetry_http::HttpClient for ExporterClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let (parts, body) = request.into_parts();
        let exchange = async move {
            let mut answer = client
                .send(parts.method, &parts.uri, parts.headers, body, Some(timeout))
                .await?;
            let mut kept = Vec::new();
            while let Some(chunk) = answer.chunk().await? {
                let room = MAX_ANSWER.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            let mut response = Response::new(Bytes::from(kept));
            *response.status_mut() = answer.status();
            *response.headers_mut() = answer.headers().clone();
            Ok::<_, crate::http::response::HttpError>(response)
        };
        // Whichever thread asks, the exchange runs where hyper's connections live.
        match self.runtime.spawn(exchange).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(failed)) => Err(Box::new(failed)),
            Err(stopped) => Err(Box::new(stopped)),
        }
    }
}
