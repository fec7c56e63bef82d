//! Parses `Retry-After`: delta-seconds or an HTTP-date (RFC 9110 §10.2.3).

use std::time::{Duration, SystemTime};

/// The delay a `Retry-After` value asks for; `None` when it is malformed. A date in the
/// past means "now".
pub fn parse(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse("7", now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse(&later, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse("soon", now), None);
        assert_eq!(parse("-3", now), None);
    }
}
