//! Opening connections to the upstream: straight, through an HTTP proxy (plain HTTP sent
//! in absolute form), or tunnelled through one with CONNECT (HTTPS), then TLS when the
//! scheme asks for it.
//!
//! The relay only ever talks to one origin (redirects are followed only on the same
//! origin), so the route is chosen once, when the client is built, from the proxy
//! environment as hyper-util's matcher reads it (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//! `NO_PROXY`, and the lowercase forms).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Uri};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How connections reach the upstream.
#[derive(Clone, Debug)]
pub enum Route {
    Direct,
    /// Plain HTTP through a proxy: connect to the proxy, send absolute-form requests.
    Forward {
        proxy: Uri,
        auth: Option<HeaderValue>,
    },
    /// HTTPS through a proxy: CONNECT to the upstream, then TLS inside the tunnel.
    Tunnel {
        proxy: Uri,
        auth: Option<HeaderValue>,
    },
}

impl Route {
    /// The route to `upstream` under the current proxy environment. An error names a proxy
    /// URL that cannot be used and what would work instead.
    pub fn for_upstream(upstream: &Uri) -> Result<Route, String> {
        let Some(intercept) = Matcher::from_system().intercept(upstream) else {
            return Ok(Route::Direct);
        };
        let proxy = intercept.uri().clone();
        if proxy.scheme_str() != Some("http") {
            // Only the scheme is shown: the rest of a proxy URL can hold a password.
            return Err(format!(
                "HTTP_PROXY / HTTPS_PROXY / ALL_PROXY: the proxy chosen for this {} URL is a {}:// proxy, which is not supported; give an http:// proxy URL (HTTPS upstreams are tunnelled through it with CONNECT)",
                upstream.scheme_str().unwrap_or("http"),
                proxy.scheme_str().unwrap_or("?")
            ));
        }
        let auth = intercept.basic_auth().cloned().map(|mut value| {
            value.set_sensitive(true);
            value
        });
        Ok(if upstream.scheme_str() == Some("https") {
            Route::Tunnel { proxy, auth }
        } else {
            Route::Forward { proxy, auth }
        })
    }

    /// The `Proxy-Authorization` value requests must carry themselves (plain HTTP through
    /// a proxy; a tunnel sends it once, on CONNECT).
    pub fn request_auth(&self) -> Option<&HeaderValue> {
        match self {
            Route::Forward { auth, .. } => auth.as_ref(),
            _ => None,
        }
    }
}

/// TCP settings for every connection.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    pub connect_timeout: Duration,
    pub keepalive: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_retries: u32,
}

/// The TCP-level connector, following a [`Route`]. TLS is layered on top by hyper-rustls.
#[derive(Clone)]
pub struct Dial {
    tcp: HttpConnector,
    route: Arc<Route>,
}

impl Dial {
    pub fn new(route: Route, options: &TcpOptions) -> Self {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false); // https URIs reach us too; hyper-rustls adds the TLS
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(options.connect_timeout));
        tcp.set_keepalive(Some(options.keepalive));
        tcp.set_keepalive_interval(Some(options.keepalive_interval));
        tcp.set_keepalive_retries(Some(options.keepalive_retries));
        Dial {
            tcp,
            route: Arc::new(route),
        }
    }
}

/// A TCP connection that knows whether it goes to a forwarding proxy, so hyper-util
/// writes absolute-form request targets on it.
pub struct Tcp {
    io: TokioIo<TcpStream>,
    to_forwarding_proxy: bool,
}

impl Service<Uri> for Dial {
    type Response = Tcp;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Tcp, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, destination: Uri) -> Self::Future {
        let mut tcp = self.tcp.clone();
        let route = self.route.clone();
        Box::pin(async move {
            match &*route {
                Route::Direct => Ok(Tcp {
                    io: tcp.call(destination).await?,
                    to_forwarding_proxy: false,
                }),
                Route::Forward { proxy, .. } => Ok(Tcp {
                    io: tcp.call(proxy.clone()).await?,
                    to_forwarding_proxy: true,
                }),
                Route::Tunnel { proxy, auth } => {
                    let mut tunnel = Tunnel::new(proxy.clone(), tcp);
                    if let Some(auth) = auth {
                        tunnel = tunnel.with_auth(auth.clone());
                    }
                    Ok(Tcp {
                        io: tunnel.call(destination).await?,
                        to_forwarding_proxy: false,
                    })
                }
            }
        })
    }
}

impl Connection for Tcp {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.to_forwarding_proxy)
    }
}

impl hyper::rt::Read for Tcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Tcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}
