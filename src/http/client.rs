//! Builds the reqwest clients: timeouts, proxies from the environment, extra CA roots and a
//! redirect policy that only follows 307/308 on the same origin.

use std::time::Duration;

use reqwest::redirect;

/// How the clients should behave; filled from the command line by `cli`.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    /// The longest gap between two reads of one response; `None` means no limit.
    pub read_timeout: Option<Duration>,
    /// Extra trusted roots (`--ca-cert`), already read and parsed.
    pub extra_roots: Vec<reqwest::Certificate>,
}

/// The most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Builds a client. Proxy variables (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`)
/// are honoured because reqwest reads them when no proxy is configured explicitly.
pub fn build(options: &ClientOptions) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("mcp-stdio/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(options.connect_timeout)
        .tcp_keepalive(Duration::from_secs(60))
        .tcp_keepalive_interval(Duration::from_secs(15))
        .tcp_keepalive_retries(4u32)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(same_origin_redirects());
    if let Some(read_timeout) = options.read_timeout {
        builder = builder.read_timeout(read_timeout);
    }
    if !options.extra_roots.is_empty() {
        builder = builder.tls_certs_merge(options.extra_roots.iter().cloned());
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// Parses the `--ca-cert` bundle, so a bad file fails at startup with a clear message.
/// (Building a client to find out would load the system's roots for nothing.)
pub fn parse_extra_roots(pem: &[u8]) -> Result<Vec<reqwest::Certificate>, String> {
    let certs = reqwest::Certificate::from_pem_bundle(pem)
        .map_err(|e| format!("--ca-cert: not a PEM certificate bundle ({e})"))?;
    if certs.is_empty() {
        return Err("--ca-cert: the file holds no PEM certificate".into());
    }
    Ok(certs)
}

/// Load balancers answer 307/308 to move a client between equivalent endpoints; following
/// those on the same origin is safe (the body and credentials stay with the same server).
/// Anything else (another origin, or 301/302/303, which would turn a POST into a GET) is
/// surfaced to the host as an error instead.
fn same_origin_redirects() -> redirect::Policy {
    redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        let keeps_method = matches!(attempt.status().as_u16(), 307 | 308);
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if same_origin && keeps_method {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}
