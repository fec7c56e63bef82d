//! Token endpoint requests and answers: the forms for a code exchange and a refresh (both
//! carry RFC 8707 `resource`), reading the answer (JSON, or the form encoding some servers
//! still use), and telling a dead grant from a passing failure.

use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;
use serde::Deserialize;

use super::authorize::sanitized;
use super::store::Grant;
use crate::secret::Secret;

/// A token endpoint's successful answer.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenAnswer {
    pub access_token: Secret,
    pub token_type: Option<String>,
    pub expires_in: Option<serde_json::Value>,
    pub refresh_token: Option<Secret>,
    pub scope: Option<String>,
    /// OpenID Connect's ID token (an identity provider's answer).
    #[serde(default)]
    pub id_token: Option<Secret>,
    /// RFC 8693's `issued_token_type` (a token exchange's answer).
    #[serde(default)]
    pub issued_token_type: Option<String>,
}

/// Why a token request failed, and what that means for the stored grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenFailure {
    /// The grant or the client is gone for good (`invalid_grant`, `invalid_client`, other
    /// 4xx): forget the grant and log in again.
    Dead(String),
    /// Worth trying again later (5xx, 429, `temporarily_unavailable`, `server_error`, the
    /// network): keep the grant.
    Passing(String),
}

impl TokenFailure {
    /// What went wrong, whichever kind it is.
    pub fn into_message(self) -> String {
        match self {
            TokenFailure::Dead(e) | TokenFailure::Passing(e) => e,
        }
    }
}

/// Reads a fetched token endpoint answer (its status, media type and body).
pub fn answer_of(fetched: &super::http::Fetched) -> Result<TokenAnswer, TokenFailure> {
    let content_type = fetched
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    read_answer(fetched.status, content_type, &fetched.body)
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: Option<String>,
}

/// Reads a token endpoint's answer.
pub fn read_answer(
    status: StatusCode,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<TokenAnswer, TokenFailure> {
    let is_form = content_type.is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if status.is_success() {
        let answer: Result<TokenAnswer, String> = if is_form {
            form_answer(body)
        } else {
            serde_json::from_slice(body).map_err(|e| e.to_string())
        };
        let answer = answer.map_err(|e| {
            TokenFailure::Passing(format!("the token endpoint's answer is unreadable ({e})"))
        })?;
        if answer.access_token.expose().is_empty()
            || answer.access_token.expose().contains(['\r', '\n', '\0'])
        {
            return Err(TokenFailure::Dead(
                "the token endpoint returned an unusable access token".into(),
            ));
        }
        return Ok(answer);
    }
    let code = serde_json::from_slice::<ErrorAnswer>(body)
        .ok()
        .and_then(|e| e.error)
        .or_else(|| {
            url::form_urlencoded::parse(body)
                .find(|(k, _)| k == "error")
                .map(|(_, v)| v.into_owned())
        })
        .map(|e| sanitized(&e));
    let said = code.clone().map_or_else(
        || format!("HTTP {status}"),
        |c| format!("{c} (HTTP {status})"),
    );
    let passing = status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || matches!(
            code.as_deref(),
            Some("temporarily_unavailable" | "server_error")
        );
    if passing {
        Err(TokenFailure::Passing(format!(
            "the token endpoint is unavailable: {said}"
        )))
    } else {
        Err(TokenFailure::Dead(format!(
            "the token endpoint refused: {said}"
        )))
    }
}

fn form_answer(body: &[u8]) -> Result<TokenAnswer, String> {
    let mut access = None;
    let mut answer = TokenAnswer {
        access_token: Secret::new(""),
        token_type: None,
        expires_in: None,
        refresh_token: None,
        scope: None,
        id_token: None,
        issued_token_type: None,
    };
    for (k, v) in url::form_urlencoded::parse(body) {
        match k.as_ref() {
            "access_token" => access = Some(Secret::new(v.into_owned())),
            "token_type" => answer.token_type = Some(v.into_owned()),
            "expires_in" => answer.expires_in = Some(serde_json::Value::String(v.into_owned())),
            "refresh_token" => answer.refresh_token = Some(Secret::new(v.into_owned())),
            "scope" => answer.scope = Some(v.into_owned()),
            "id_token" => answer.id_token = Some(Secret::new(v.into_owned())),
            "issued_token_type" => answer.issued_token_type = Some(v.into_owned()),
            _ => {}
        }
    }
    answer.access_token = access.ok_or("no access_token")?;
    Ok(answer)
}

/// Where a grant came from, for building the stored record.
pub struct Issued<'a> {
    pub issuer: &'a str,
    pub token_endpoint: &'a str,
    pub client_id: &'a str,
    pub resource: Option<&'a str>,
    /// The scope that was asked for, kept when the server does not say what it granted.
    pub requested_scope: Option<&'a str>,
}

/// Turns an answer into the grant to store. A refresh token the server did not re-issue
/// is kept from `previous` (servers need not rotate); an `expires_in` that is missing,
/// non-numeric, not finite or not positive means "no known expiry", never "expired".
pub fn grant_from(
    answer: TokenAnswer,
    issued: &Issued<'_>,
    previous: Option<&Grant>,
    now: u64,
) -> Grant {
    let expires_in = answer.expires_in.as_ref().and_then(|v| match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    });
    let expires_at = expires_in
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| now.saturating_add(s as u64));
    Grant {
        access_token: answer.access_token,
        token_type: answer.token_type.unwrap_or_else(|| "Bearer".into()),
        expires_at,
        refresh_token: answer
            .refresh_token
            .or_else(|| previous.and_then(|p| p.refresh_token.clone())),
        scope: answer
            .scope
            .or_else(|| issued.requested_scope.map(str::to_owned))
            .or_else(|| previous.and_then(|p| p.scope.clone())),
        issuer: issued.issuer.to_owned(),
        token_endpoint: issued.token_endpoint.to_owned(),
        client_id: issued.client_id.to_owned(),
        resource: issued.resource.map(str::to_owned),
        revocation_endpoint: previous.and_then(|p| p.revocation_endpoint.clone()),
        dpop_key: previous.and_then(|p| p.dpop_key.clone()),
    }
}

/// Whether the grant's access token should be refreshed now: it expires within `leeway`
/// seconds. A grant without a known expiry is used until the server refuses it.
pub fn needs_refresh(grant: &Grant, now: u64, leeway: u64) -> bool {
    grant
        .expires_at
        .is_some_and(|at| at <= now.saturating_add(leeway))
}

/// The current time in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The form of an authorization code exchange.
pub fn code_exchange_form<'a>(
    code: &'a Secret,
    verifier: &'a Secret,
    redirect_uri: &'a str,
    client_id: &'a str,
    resource: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code.expose()),
        ("code_verifier", verifier.expose()),
        ("redirect_uri", redirect_uri),
        ("client_id", client_id),
    ];
    if let Some(resource) = resource {
        form.push(("resource", resource));
    }
    form
}

/// The form of a refresh. `scope` is left out: a refresh cannot widen a grant, and some
/// servers reject a repeated scope.
pub fn refresh_form<'a>(
    refresh_token: &'a Secret,
    client_id: &'a str,
    resource: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.expose()),
    ];
    // A workload's login has no client id to send.
    if !client_id.is_empty() {
        form.push(("client_id", client_id));
    }
    if let Some(resource) = resource {
        form.push(("resource", resource));
    }
    form
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUED: Issued<'static> = Issued {
        issuer: "https://as",
        token_endpoint: "https://as/token",
        client_id: "c",
        resource: Some("https://mcp/mcp"),
        requested_scope: Some("read"),
    };

    #[test]
    fn reads_json_and_form_answers() {
        let json = read_answer(
            StatusCode::OK,
            Some("application/json"),
            br#"{"access_token":"at","token_type":"bearer","expires_in":3600,"refresh_token":"rt"}"#,
        )
        .unwrap();
        assert_eq!(json.access_token.expose(), "at");
        let form = read_answer(
            StatusCode::OK,
            Some("application/x-www-form-urlencoded; charset=utf-8"),
            b"access_token=gh1&scope=repo&token_type=bearer",
        )
        .unwrap();
        assert_eq!(form.access_token.expose(), "gh1");
        assert_eq!(form.scope.as_deref(), Some("repo"));
    }

    #[test]
    fn dead_and_passing_failures_are_told_apart() {
        let dead = |status: u16, body: &[u8]| {
            matches!(
                read_answer(StatusCode::from_u16(status).unwrap(), None, body),
                Err(TokenFailure::Dead(_))
            )
        };
        assert!(dead(400, br#"{"error":"invalid_grant"}"#));
        assert!(dead(401, br#"{"error":"invalid_client"}"#));
        assert!(dead(400, b""));
        assert!(!dead(503, b""));
        assert!(!dead(429, b""));
        assert!(!dead(400, br#"{"error":"temporarily_unavailable"}"#));
        assert!(!dead(500, br#"{"error":"invalid_grant"}"#));
        assert!(
            dead(200, br#"{"access_token":"a\nb"}"#),
            "a header-injecting token"
        );
    }

    #[test]
    fn a_grant_keeps_the_old_refresh_token_and_treats_odd_expiry_as_none() {
        let first = grant_from(
            read_answer(
                StatusCode::OK,
                None,
                br#"{"access_token":"a1","refresh_token":"r1","expires_in":60}"#,
            )
            .unwrap(),
            &ISSUED,
            None,
            1000,
        );
        assert_eq!(first.expires_at, Some(1060));
        assert_eq!(first.scope.as_deref(), Some("read"));
        let second = grant_from(
            read_answer(
                StatusCode::OK,
                None,
                br#"{"access_token":"a2","expires_in":-5}"#,
            )
            .unwrap(),
            &ISSUED,
            Some(&first),
            2000,
        );
        assert_eq!(second.refresh_token.as_ref().unwrap().expose(), "r1");
        assert_eq!(second.expires_at, None);
        assert!(!needs_refresh(&second, 9_999_999, 60));
        assert!(needs_refresh(&first, 1000, 60));
        assert!(!needs_refresh(&first, 999, 60));
        let rotated = grant_from(
            read_answer(
                StatusCode::OK,
                None,
                br#"{"access_token":"a3","refresh_token":"r2","expires_in":"30"}"#,
            )
            .unwrap(),
            &ISSUED,
            Some(&first),
            0,
        );
        assert_eq!(rotated.refresh_token.unwrap().expose(), "r2");
        assert_eq!(rotated.expires_at, Some(30));
    }

    #[test]
    fn forms_carry_the_resource() {
        let (code, verifier, refresh) = (Secret::new("c"), Secret::new("v"), Secret::new("r"));
        let form = code_exchange_form(
            &code,
            &verifier,
            "http://127.0.0.1:1/cb",
            "id",
            Some("https://mcp"),
        );
        assert!(form.contains(&("resource", "https://mcp")));
        assert!(form.contains(&("code_verifier", "v")));
        let form = refresh_form(&refresh, "id", None);
        assert!(!form.iter().any(|(k, _)| *k == "resource" || *k == "scope"));
    }
}
