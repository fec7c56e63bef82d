//! What a POST to the MCP endpoint must say about its body and its answer (Streamable HTTP:
//! "the client MUST include an Accept header, listing both application/json and
//! text/event-stream", and a JSON body). Checked before the body is read, so a request a
//! web page can send without a CORS preflight (`text/plain`) is never served.

use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE};

/// Why a POST's headers were refused, with what to send instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// 415: the body is not declared as UTF-8 JSON.
    ContentType(String),
    /// 406: the client does not take both kinds of answer.
    Accept(String),
}

/// `Content-Type` must be `application/json` (a `charset`, if any, `utf-8`: JSON exchanged
/// between systems is UTF-8, RFC 8259 §8.1); `Accept` must allow `application/json` and
/// `text/event-stream`, by name or by a wildcard (`*/*`, `application/*`, `text/*`, as
/// RFC 9110 §12.5.1 reads them), with a non-zero `q`.
pub fn check_post(headers: &HeaderMap) -> Result<(), Refused> {
    if is_the_usual_post(headers) {
        return Ok(());
    }
    check_media_types(headers)
}

/// `check_post` with every media type parsed.
fn check_media_types(headers: &HeaderMap) -> Result<(), Refused> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let fix_type = "send the body with Content-Type: application/json";
    let Ok(declared) = content_type.trim().parse::<mime::Mime>() else {
        return Err(Refused::ContentType(if content_type.is_empty() {
            format!("the request has no Content-Type; {fix_type}")
        } else {
            format!("the Content-Type is not a media type; {fix_type}")
        }));
    };
    if declared.essence_str() != "application/json" {
        return Err(Refused::ContentType(format!(
            "the body is declared as {}; {fix_type}",
            declared.essence_str()
        )));
    }
    if let Some(charset) = declared.get_param(mime::CHARSET)
        && !charset.as_str().eq_ignore_ascii_case("utf-8")
    {
        return Err(Refused::ContentType(format!(
            "JSON is UTF-8 (RFC 8259), not {}; send Content-Type: application/json (with charset=utf-8 or none)",
            charset.as_str()
        )));
    }
    let accept: Vec<&str> = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let takes_json = accepts(&accept, "application", "json");
    let takes_sse = accepts(&accept, "text", "event-stream");
    if !(takes_json && takes_sse) {
        let missing = match (takes_json, takes_sse) {
            (false, false) => "application/json and text/event-stream",
            (false, true) => "application/json",
            _ => "text/event-stream",
        };
        return Err(Refused::Accept(format!(
            "the Accept header must allow both answers an MCP server may give, and it does not allow {missing}; send Accept: application/json, text/event-stream"
        )));
    }
    Ok(())
}

/// The headers nearly every client sends, recognized without parsing media types (they
/// would pass the full check): `Content-Type: application/json` (or with
/// `charset=utf-8`), and one `Accept` that lists both types by name, with no parameters.
fn is_the_usual_post(headers: &HeaderMap) -> bool {
    let usual_type = headers.get(CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.eq_ignore_ascii_case(b"application/json")
            || v.eq_ignore_ascii_case(b"application/json; charset=utf-8")
            || v.eq_ignore_ascii_case(b"application/json;charset=utf-8")
    });
    if !usual_type {
        return false;
    }
    let mut accept = headers.get_all(ACCEPT).iter();
    let (Some(only), None) = (accept.next(), accept.next()) else {
        return false;
    };
    let Ok(only) = only.to_str() else {
        return false;
    };
    if only.contains(';') {
        return false;
    }
    let mut ranges = only.split(',').map(str::trim);
    let (mut json, mut sse) = (false, false);
    for range in &mut ranges {
        json |= range.eq_ignore_ascii_case("application/json");
        sse |= range.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}

/// Whether any listed media range matches `kind/sub` with `q` above zero.
fn accepts(values: &[&str], kind: &str, sub: &str) -> bool {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(|range| range.trim().parse::<mime::Mime>().ok())
        .any(|range| {
            let type_ok = range.type_() == "*" || range.type_() == kind;
            let sub_ok = range.subtype() == "*" || range.subtype() == sub;
            let weight = range
                .get_param("q")
                .and_then(|q| q.as_str().parse::<f32>().ok())
                .unwrap_or(1.0);
            type_ok && sub_ok && weight > 0.0
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: Option<&str>, accept: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = content_type {
            headers.insert(CONTENT_TYPE, value.parse().unwrap());
        }
        for value in accept {
            headers.append(ACCEPT, value.parse().unwrap());
        }
        headers
    }

    const BOTH: &[&str] = &["application/json, text/event-stream"];

    #[test]
    fn the_usual_post_is_recognized_without_parsing_and_only_when_the_full_check_agrees() {
        let cases: &[(Option<&str>, &[&str])] = &[
            (Some("application/json"), BOTH),
            (
                Some("Application/JSON; charset=UTF-8"),
                &["text/event-stream, application/json"],
            ),
            (Some("application/json"), &["application/json"]),
            (
                Some("application/json"),
                &["application/json;q=0, text/event-stream"],
            ),
            (Some("text/plain"), BOTH),
            (Some("application/json; charset=latin1"), BOTH),
            (None, BOTH),
            (
                Some("application/json"),
                &["application/json", "text/event-stream"],
            ),
        ];
        let mut fast = 0;
        for (content_type, accept) in cases {
            let headers = headers(*content_type, accept);
            if is_the_usual_post(&headers) {
                fast += 1;
                // The shortcut never lets through what the full check refuses.
                assert_eq!(
                    check_media_types(&headers),
                    Ok(()),
                    "{content_type:?} {accept:?}"
                );
            }
        }
        assert_eq!(fast, 2, "only the two usual forms take the shortcut");
    }

    #[test]
    fn json_bodies_with_utf8_or_no_charset_pass() {
        for content_type in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON; Charset=\"UTF-8\"",
        ] {
            assert_eq!(
                check_post(&headers(Some(content_type), BOTH)),
                Ok(()),
                "{content_type}"
            );
        }
    }

    #[test]
    fn other_bodies_get_415() {
        for content_type in [
            None,
            Some("text/plain"),
            Some("text/plain; charset=utf-8"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/json-seq"),
            Some("application/vnd.api+json"),
            Some("application/json; charset=iso-8859-1"),
            Some("application/json; charset=utf-16"),
            Some("json"),
        ] {
            assert!(
                matches!(
                    check_post(&headers(content_type, BOTH)),
                    Err(Refused::ContentType(_))
                ),
                "{content_type:?}"
            );
        }
    }

    #[test]
    fn accept_must_allow_both_answers() {
        for accept in [
            &["application/json, text/event-stream"][..],
            &["text/event-stream;q=0.5, application/json"],
            &["application/json", "text/event-stream"],
            &["*/*"],
            &["application/*, text/*"],
            &["application/json, */*;q=0.1"],
        ] {
            assert_eq!(
                check_post(&headers(Some("application/json"), accept)),
                Ok(()),
                "{accept:?}"
            );
        }
        for accept in [
            &[][..],
            &["text/html"],
            &["application/json"],
            &["text/event-stream"],
            &["application/json, text/event-stream;q=0"],
            &["*/*;q=0"],
            &["garbage"],
        ] {
            assert!(
                matches!(
                    check_post(&headers(Some("application/json"), accept)),
                    Err(Refused::Accept(_))
                ),
                "{accept:?}"
            );
        }
    }
}
