//! Client ID Metadata Documents: a client whose id is an https URL the operator allowed
//! (`--allow-client-id-url`) is described by the JSON document at that URL instead of a
//! registration. Documents are fetched by `fetch` (public addresses only, pinned, capped),
//! checked here, and cached: `max-age` clamped to 1 minute–24 hours (1 hour by default),
//! the last good copy used for up to 24 hours when a refetch fails, a failure not retried
//! for 30 seconds, one fetch per URL at a time, and 404/410 meaning the client withdrew.
//! The cache holds one entry per allowed URL, so it is bounded by the allowlist.

mod address;
mod fetch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;
use url::Url;

use fetch::Fetched;
pub use fetch::Policy;

use super::client::ClientRecord;

const DEFAULT_FRESH: Duration = Duration::from_secs(3600);
const MIN_FRESH: Duration = Duration::from_secs(60);
const MAX_FRESH: Duration = Duration::from_secs(24 * 3600);
const STALE_FOR: Duration = Duration::from_secs(24 * 3600);
const RETRY_AFTER: Duration = Duration::from_secs(30);
const MAX_REDIRECT_URIS: usize = 16;

#[derive(Default)]
struct Entry {
    record: Option<ClientRecord>,
    fresh_until: Option<Instant>,
    usable_until: Option<Instant>,
    retry_after: Option<Instant>,
    last_error: Option<String>,
}

pub struct Documents {
    policy: Policy,
    tls: Arc<rustls::ClientConfig>,
    entries: HashMap<String, Arc<Mutex<Entry>>>,
}

impl Documents {
    pub fn new(allowed: &[Url], policy: Policy) -> Result<Self, String> {
        let tls = crate::http::client::tls_config(true, &[])?;
        Ok(Documents {
            policy,
            tls: Arc::new(tls),
            entries: allowed
                .iter()
                .map(|url| (url.as_str().to_owned(), Arc::default()))
                .collect(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `client_id` is one of the allowed document URLs.
    pub fn covers(&self, client_id: &str) -> bool {
        self.entries.contains_key(client_id)
    }

    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The client the document at `client_id` describes: `Ok(None)` when it was withdrawn,
    /// `Err` with what went wrong when there is no usable copy.
    pub async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, String> {
        let Some(entry) = self.entries.get(client_id) else {
            return Ok(None);
        };
        let mut entry = entry.lock().await;
        let now = Instant::now();
        if entry.fresh_until.is_some_and(|t| now < t) {
            return Ok(entry.record.clone());
        }
        let stale = || {
            entry
                .usable_until
                .is_some_and(|t| now < t)
                .then(|| entry.record.clone())
                .flatten()
        };
        if entry.retry_after.is_some_and(|t| now < t) {
            return match stale() {
                Some(record) => Ok(Some(record)),
                None => Err(entry.last_error.clone().unwrap_or_default()),
            };
        }
        let url = Url::parse(client_id).expect("allowed URLs are URLs");
        let fetched = fetch::fetch(&url, &self.policy, self.tls.clone()).await;
        let failure = |entry: &mut Entry, why: String| {
            tracing::warn!(client_id, reason = %why, "client metadata document refused");
            entry.retry_after = Some(now + RETRY_AFTER);
            entry.last_error = Some(format!(
                "the client's metadata document at {client_id} cannot be used: {why}"
            ));
        };
        match fetched {
            Fetched::Document(body, max_age) => match validate(&body, client_id) {
                Ok(record) => {
                    let fresh = max_age.unwrap_or(DEFAULT_FRESH).clamp(MIN_FRESH, MAX_FRESH);
                    *entry = Entry {
                        record: Some(record.clone()),
                        fresh_until: Some(now + fresh),
                        usable_until: Some(now + STALE_FOR),
                        retry_after: None,
                        last_error: None,
                    };
                    Ok(Some(record))
                }
                Err(why) => {
                    // A document that is wrong now is not used, not even an older copy.
                    entry.record = None;
                    entry.usable_until = None;
                    failure(&mut entry, why);
                    Err(entry.last_error.clone().unwrap_or_default())
                }
            },
            Fetched::Withdrawn => {
                tracing::info!(client_id, "the client withdrew its metadata document");
                *entry = Entry {
                    retry_after: Some(now + RETRY_AFTER),
                    ..Entry::default()
                };
                Ok(None)
            }
            Fetched::Refused(why) => {
                entry.record = None;
                entry.usable_until = None;
                failure(&mut entry, why);
                Err(entry.last_error.clone().unwrap_or_default())
            }
            Fetched::Failed(why) => {
                failure(&mut entry, why);
                match entry
                    .usable_until
                    .is_some_and(|t| now < t)
                    .then(|| entry.record.clone())
                    .flatten()
                {
                    Some(record) => Ok(Some(record)),
                    None => Err(entry.last_error.clone().unwrap_or_default()),
                }
            }
        }
    }
}

/// The document's rules: it names itself, has a name, holds no secret, is a public
/// client, and its redirect URIs are exact https or loopback http.
fn validate(body: &[u8], client_id: &str) -> Result<ClientRecord, String> {
    let document: Value =
        serde_json::from_slice(body).map_err(|_| "the document is not JSON".to_owned())?;
    let document = document
        .as_object()
        .ok_or("the document is not a JSON object")?;
    if document.get("client_id").and_then(Value::as_str) != Some(client_id) {
        return Err("its client_id is not its own URL".into());
    }
    let name = document
        .get("client_name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.chars().count() <= 200 && !n.chars().any(char::is_control))
        .ok_or("it has no client_name (a non-empty string of at most 200 characters)")?;
    if let Some(secret) = ["client_secret", "client_secret_expires_at"]
        .into_iter()
        .find(|k| document.contains_key(*k))
    {
        return Err(format!(
            "it holds {secret}: a metadata document describes a public client"
        ));
    }
    if let Some(method) = document.get("token_endpoint_auth_method")
        && method.as_str() != Some("none")
    {
        return Err("its token_endpoint_auth_method is not \"none\"".into());
    }
    let uris = document
        .get("redirect_uris")
        .and_then(Value::as_array)
        .filter(|u| !u.is_empty() && u.len() <= MAX_REDIRECT_URIS)
        .ok_or(format!(
            "redirect_uris must be 1 to {MAX_REDIRECT_URIS} URIs"
        ))?;
    let mut redirect_uris = Vec::new();
    for uri in uris {
        let uri = uri.as_str().ok_or("each redirect URI must be a string")?;
        let parsed = Url::parse(uri).map_err(|_| format!("'{uri}' is not a URI"))?;
        let https_exact = parsed.scheme() == "https"
            && parsed.host_str().is_some()
            && parsed.fragment().is_none()
            && parsed.username().is_empty()
            && parsed.password().is_none();
        if !https_exact && super::redirect::check_registrable(uri, &[]).is_err() {
            return Err(format!(
                "the redirect URI '{uri}' is neither https nor loopback http"
            ));
        }
        redirect_uris.push(uri.to_owned());
    }
    Ok(ClientRecord {
        redirect_uris,
        client_name: Some(name.to_owned()),
    })
}

#[cfg(test)]
mod tests;
