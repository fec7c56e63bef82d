//! How the authorization server answers: OAuth JSON (never cached), OAuth errors
//! (RFC 6749 §5.2), redirects back to a client, and small HTML pages that run no script
//! and cannot be framed.

use axum::body::Body;
use http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, PRAGMA};
use http::{Response, StatusCode};

pub type Reply = Response<Body>;

/// A JSON answer with `Cache-Control: no-store` (tokens and client ids must not be cached).
pub fn json(status: StatusCode, value: &serde_json::Value) -> Reply {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .header(CACHE_CONTROL, "no-store")
        .header(PRAGMA, "no-cache")
        .body(Body::from(value.to_string()))
        .expect("a valid response")
}

/// An OAuth error: `error` is the RFC's code, `description` says what would work.
pub fn error(status: StatusCode, code: &str, description: &str) -> Reply {
    json(
        status,
        &serde_json::json!({"error": code, "error_description": description}),
    )
}

/// `303 See Other` to `location` (after a form, and for errors sent back to a client).
pub fn redirect(location: &str) -> Reply {
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(LOCATION, location)
        .header(CACHE_CONTROL, "no-store")
        .body(Body::empty())
        .expect("a valid response")
}

/// An HTML page. `form_action` is where its form may post and be redirected to (Chromium
/// applies `form-action` to the redirect after the post as well).
pub fn page(status: StatusCode, title: &str, body_html: &str, form_action: &[&str]) -> Reply {
    let mut actions = vec!["'self'".to_owned()];
    actions.extend(form_action.iter().map(|a| (*a).to_owned()));
    let policy = format!(
        "default-src 'none'; style-src 'unsafe-inline'; form-action {}; frame-ancestors 'none'; base-uri 'none'",
        actions.join(" ")
    );
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title>\
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em;color:#222}}\
code{{background:#f3f3f3;padding:0 .2em}}button{{font:inherit;padding:.4em 1.2em;margin-right:.6em}}</style>\
</head><body>{body_html}</body></html>\n",
        title = escape(title)
    );
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "text/html; charset=utf-8")
        .header(CACHE_CONTROL, "no-store")
        .header(CONTENT_SECURITY_POLICY, policy)
        .header("x-frame-options", "DENY")
        // Not `no-referrer`: with it Chromium sends `Origin: null` on the form's POST, which
        // the Origin guard refuses. `same-origin` keeps the page's URL from the client.
        .header("referrer-policy", "same-origin")
        .header("x-content-type-options", "nosniff")
        .body(Body::from(html))
        .expect("a valid response")
}

/// A page that says what went wrong at `/authorize` when it cannot be sent back to the
/// client (unknown client, unregistered redirect): never a redirect.
pub fn problem_page(status: StatusCode, what: &str) -> Reply {
    page(
        status,
        "Authorization failed",
        &format!("<h1>Authorization failed</h1><p>{}</p>", escape(what)),
        &[],
    )
}

/// HTML-escapes text for an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
