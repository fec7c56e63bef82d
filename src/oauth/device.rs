//! The device authorization grant (RFC 8628), for machines without a browser: show a code
//! and a URL on stderr, then poll the token endpoint at the pace the server sets.

use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::authorize::sanitized;
use super::wellknown::checked;
use crate::secret::Secret;

pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// The device authorization endpoint's answer.
#[derive(Deserialize)]
pub struct DeviceAnswer {
    pub device_code: Secret,
    pub user_code: String,
    #[serde(alias = "verification_url")] // Google's spelling
    pub verification_uri: String,
    pub verification_uri_complete: Option<String>,
    pub expires_in: Option<u64>,
    pub interval: Option<u64>,
}

impl DeviceAnswer {
    /// Checks the answer; the URL to show must be https (or loopback) like any other.
    pub fn parse(body: &[u8]) -> Result<DeviceAnswer, String> {
        let answer: DeviceAnswer = serde_json::from_slice(body)
            .map_err(|e| format!("the device authorization answer is unreadable ({e})"))?;
        checked(&answer.verification_uri, "verification_uri")?;
        if let Some(complete) = &answer.verification_uri_complete {
            checked(complete, "verification_uri_complete")?;
        }
        Ok(answer)
    }

    /// What to show the user: the complete URI when there is one, and the code.
    pub fn instructions(&self) -> String {
        match &self.verification_uri_complete {
            Some(complete) => format!(
                "to log in, open {complete}\n  (or open {} and enter the code {})",
                self.verification_uri, self.user_code
            ),
            None => format!(
                "to log in, open {} and enter the code {}",
                self.verification_uri, self.user_code
            ),
        }
    }

    /// How long to keep polling: the code's lifetime (1800 s when unstated, at most 3600 s),
    /// and never past `limit` (`--oauth-timeout`).
    pub fn deadline(&self, limit: Duration) -> Duration {
        Duration::from_secs(self.expires_in.unwrap_or(1800).min(3600)).min(limit)
    }

    /// The first polling interval: the server's (5 s when unstated), between 1 and 60 s.
    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.interval.unwrap_or(5).clamp(1, 60))
    }
}

/// What one poll of the token endpoint means.
#[derive(Debug, PartialEq, Eq)]
pub enum Poll {
    /// Not approved yet: ask again after the same interval.
    Pending,
    /// Asked too often: ask again, 5 s slower from now on (RFC 8628 §3.5).
    SlowDown,
    /// The login will not complete.
    Failed(String),
}

/// Classifies an error answer to a device-code token request.
pub fn poll_error(error: Option<&str>) -> Poll {
    match error {
        Some("authorization_pending") => Poll::Pending,
        Some("slow_down") => Poll::SlowDown,
        Some("expired_token") => Poll::Failed(
            "the device code expired before the login was approved; run the login again".into(),
        ),
        Some("access_denied") => Poll::Failed("the login was denied".into()),
        Some(other) => Poll::Failed(format!(
            "the authorization server refused the device login: {}",
            sanitized(other)
        )),
        None => Poll::Failed("the authorization server refused the device login".into()),
    }
}

/// The next interval after `poll`.
pub fn next_interval(current: Duration, poll: &Poll) -> Duration {
    match poll {
        Poll::SlowDown => (current + Duration::from_secs(5)).min(Duration::from_secs(60)),
        _ => current,
    }
}

/// The form of the device authorization request.
pub fn request_form<'a>(
    client_id: &'a str,
    scope: Option<&'a str>,
    resource: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut form = vec![("client_id", client_id)];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    if let Some(resource) = resource {
        form.push(("resource", resource));
    }
    form
}

/// The form of one poll.
pub fn poll_form<'a>(
    device_code: &'a Secret,
    client_id: &'a str,
    resource: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut form = vec![
        ("grant_type", GRANT_TYPE),
        ("device_code", device_code.expose()),
        ("client_id", client_id),
    ];
    if let Some(resource) = resource {
        form.push(("resource", resource));
    }
    form
}

/// Checks that a device endpoint URL from metadata is usable.
pub fn endpoint(url: Option<&Url>) -> Result<&Url, String> {
    url.ok_or_else(|| {
        "the authorization server offers no device authorization endpoint; use the browser login (--oauth without --oauth-device) or log in on another machine with `mcp-stdio login`".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_answer_and_bounds_its_timing() {
        let answer = DeviceAnswer::parse(
            br#"{"device_code":"dc","user_code":"ABCD-EFGH","verification_url":"https://as/device","expires_in":99999,"interval":0}"#,
        )
        .unwrap();
        assert_eq!(answer.verification_uri, "https://as/device");
        assert_eq!(
            answer.deadline(Duration::from_secs(120)),
            Duration::from_secs(120)
        );
        assert_eq!(
            answer.deadline(Duration::from_secs(9999)),
            Duration::from_secs(3600)
        );
        assert_eq!(answer.interval(), Duration::from_secs(1));
        assert!(answer.instructions().contains("ABCD-EFGH"));
        assert!(
            DeviceAnswer::parse(
                br#"{"device_code":"d","user_code":"u","verification_uri":"http://evil/"}"#
            )
            .is_err()
        );
    }

    #[test]
    fn polling_follows_the_server() {
        assert_eq!(poll_error(Some("authorization_pending")), Poll::Pending);
        let five = Duration::from_secs(5);
        assert_eq!(
            next_interval(five, &poll_error(Some("slow_down"))),
            Duration::from_secs(10)
        );
        assert_eq!(
            next_interval(Duration::from_secs(58), &Poll::SlowDown),
            Duration::from_secs(60)
        );
        assert_eq!(next_interval(five, &Poll::Pending), five);
        assert!(
            matches!(poll_error(Some("expired_token")), Poll::Failed(m) if m.contains("expired"))
        );
        assert!(matches!(poll_error(Some("access_denied")), Poll::Failed(_)));
    }
}
