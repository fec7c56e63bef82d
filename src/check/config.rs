//! What a check is told: the URL, the connection, the credential or stored login, the
//! transport and the bounds, as `cli/` validated them.

use http::HeaderMap;
use url::Url;

use crate::http::client::ClientOptions;

/// `check --max-pages`' default; the relay's `--check`, which has no such flag, uses it.
pub const DEFAULT_MAX_PAGES: u64 = 100;

/// `--transport`: found as the relay finds it, or taken as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    Auto,
    StreamableHttp,
    Sse,
}

pub struct CheckConfig {
    pub url: Url,
    pub client: ClientOptions,
    /// `-H` headers.
    pub headers: HeaderMap,
    /// Which credential `headers` carry, if any: `bearer-token` or `header` (`-H`).
    pub credential: &'static str,
    /// Where the stored login is, and how to refresh it.
    pub oauth: crate::oauth::OAuthConfig,
    pub transport: TransportChoice,
    pub max_message_size: usize,
    /// `--max-pages`: list pages read per kind before the count stops.
    pub max_pages: usize,
}
