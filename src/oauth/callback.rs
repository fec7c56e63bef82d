//! The loopback redirect listener (RFC 8252 §7.3): one `GET /callback` on 127.0.0.1,
//! captured once, answered with a page that caches nothing and leaks no referrer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::RawQuery;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

pub struct CallbackServer {
    pub redirect_uri: String,
    received: oneshot::Receiver<String>,
    server: tokio::task::JoinHandle<()>,
}

impl CallbackServer {
    /// Listens on 127.0.0.1:`port` (0: any free port). If a wanted port is busy, a free
    /// one is used when `port_is_a_preference`.
    pub async fn start(port: u16, port_is_a_preference: bool) -> Result<Self, String> {
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => listener,
            Err(_) if port_is_a_preference && port != 0 => {
                tokio::net::TcpListener::bind(("127.0.0.1", 0))
                    .await
                    .map_err(|e| format!("cannot listen for the login callback: {e}"))?
            }
            Err(e) => {
                return Err(format!(
                    "cannot listen for the login callback on 127.0.0.1:{port} ({e}); choose another --callback-port"
                ));
            }
        };
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot listen for the login callback: {e}"))?
            .port();
        let (tx, received) = oneshot::channel();
        let slot = Arc::new(Mutex::new(Some(tx)));
        let app = axum::Router::new().route(
            "/callback",
            axum::routing::get(move |headers: HeaderMap, query: RawQuery| {
                let slot = slot.clone();
                async move { answer(&headers, query.0, &slot) }
            }),
        );
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(CallbackServer {
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
            received,
            server,
        })
    }

    /// Waits for the browser to come back; the raw query string of the callback.
    pub async fn wait(self, timeout: Duration) -> Result<String, String> {
        let outcome = tokio::time::timeout(timeout, self.received).await;
        self.server.abort();
        match outcome {
            Ok(Ok(query)) => Ok(query),
            Ok(Err(_)) => Err("the login callback listener stopped".into()),
            Err(_) => Err(format!(
                "the login did not complete within {} s (--oauth-timeout); run it again, or use --oauth-device on a machine without a browser",
                timeout.as_secs()
            )),
        }
    }
}

fn answer(
    headers: &HeaderMap,
    query: Option<String>,
    slot: &Mutex<Option<oneshot::Sender<String>>>,
) -> Response {
    // Only a browser that came to this machine by its loopback name is answered (a DNS
    // rebinding page on another name is not).
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    if !matches!(name, "127.0.0.1" | "localhost" | "[::1]") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let first = slot.lock().expect("callback lock").take();
    let body = match first {
        Some(tx) => {
            let _ = tx.send(query.unwrap_or_default());
            "<!doctype html><title>mcp-stdio</title><p>Login received. You can close this tab and return to your application.</p>"
        }
        None => "<!doctype html><title>mcp-stdio</title><p>This login was already received.</p>",
    };
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(uri: &str, host: &str) -> (u16, String, HeaderMap) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let url = url::Url::parse(uri).unwrap();
        let mut stream =
            tokio::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap()))
                .await
                .unwrap();
        let target = &uri[uri.find("/callback").unwrap_or(uri.len() - 1)..];
        stream
            .write_all(
                format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.unwrap();
        let status = raw[9..12].parse().unwrap();
        let mut headers = HeaderMap::new();
        for line in raw.lines().skip(1).take_while(|l| !l.is_empty()) {
            let (k, v) = line.split_once(": ").unwrap();
            headers.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        (status, raw, headers)
    }

    #[tokio::test]
    async fn captures_the_first_callback_only() {
        let server = CallbackServer::start(0, true).await.unwrap();
        let uri = server.redirect_uri.clone();
        let port = url::Url::parse(&uri).unwrap().port().unwrap();
        let (status, _, _) = get(&format!("{uri}?code=x"), &format!("evil.example:{port}")).await;
        assert_eq!(status, 404, "a foreign Host is not answered");
        let (status, body, headers) = get(
            &format!("{uri}?code=c1&state=s"),
            &format!("127.0.0.1:{port}"),
        )
        .await;
        assert_eq!(status, 200);
        assert!(body.contains("Login received"));
        assert_eq!(headers["cache-control"], "no-store");
        assert_eq!(headers["referrer-policy"], "no-referrer");
        let (_, body, _) = get(&format!("{uri}?code=c2"), &format!("localhost:{port}")).await;
        assert!(body.contains("already received"));
        assert_eq!(
            server.wait(Duration::from_secs(5)).await.unwrap(),
            "code=c1&state=s"
        );
    }

    #[tokio::test]
    async fn a_missing_browser_times_out_with_advice() {
        let server = CallbackServer::start(0, true).await.unwrap();
        let e = server.wait(Duration::from_millis(50)).await.unwrap_err();
        assert!(
            e.contains("--oauth-timeout") && e.contains("--oauth-device"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_busy_wanted_port_is_an_error_unless_it_is_a_preference() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = CallbackServer::start(port, false).await.err().unwrap();
        assert!(e.contains("--callback-port"), "{e}");
        let server = CallbackServer::start(port, true).await.unwrap();
        assert!(!server.redirect_uri.contains(&format!(":{port}/")));
    }
}
