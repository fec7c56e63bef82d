//! The token endpoint: `authorization_code` (the code checked against its client,
//! redirect and PKCE verifier, all in the transaction that spends it) and `refresh_token`
//! (rotated on every use; a spent one presented again revokes the grant). Public clients
//! name themselves with `client_id`; nothing else authenticates them but PKCE and
//! possession of the refresh token.

use http::{HeaderMap, StatusCode};
use serde_json::json;

use super::form::Params;
use super::reply::{self, Reply};
use super::server::AuthServer;
use super::store::{Grant, Redeemed};

/// Why a presented code or refresh token does not fit this request.
#[derive(Debug)]
enum Mismatch {
    Client,
    Redirect,
    Verifier,
    Resource,
    Scope,
}

impl Mismatch {
    fn describe(&self) -> &'static str {
        match self {
            Mismatch::Client => "it was issued to another client",
            Mismatch::Redirect => "redirect_uri differs from the authorization request's",
            Mismatch::Verifier => "code_verifier does not match the code_challenge",
            Mismatch::Resource => "resource differs from the one the grant is for",
            Mismatch::Scope => "scope asks for more than the grant holds",
        }
    }
}

pub async fn token(server: &AuthServer, headers: &HeaderMap, body: &[u8]) -> Reply {
    if headers.contains_key(http::header::AUTHORIZATION) {
        return reply::error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "clients here are public: send client_id in the body, no client secret",
        );
    }
    let params = Params::parse(body);
    let grant_type = match params.single("grant_type") {
        Ok(Some(grant_type)) => grant_type.to_owned(),
        Ok(None) => return invalid_request("grant_type is required"),
        Err(why) => return invalid_request(&why),
    };
    let client_id = match params.single("client_id") {
        Ok(Some(id)) => id.to_owned(),
        Ok(None) => {
            return invalid_request("client_id is required (public clients name themselves)");
        }
        Err(why) => return invalid_request(&why),
    };
    match server.client(&client_id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            log(&client_id, None, "unknown_client");
            return reply::error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "this client is not registered here (its registration may have been recycled): register again",
            );
        }
        Err(lookup) => return lookup.reply(),
    }
    match grant_type.as_str() {
        "authorization_code" => authorization_code(server, &params, client_id).await,
        "refresh_token" => refresh_token(server, &params, client_id).await,
        other => reply::error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!(
                "grant_type {other} is not supported: use authorization_code or refresh_token"
            ),
        ),
    }
}

async fn authorization_code(server: &AuthServer, params: &Params, client_id: String) -> Reply {
    let fields = (|| {
        let code = params.single("code")?.ok_or("code is required")?.to_owned();
        let redirect_uri = params.single("redirect_uri")?.map(str::to_owned);
        let verifier = params
            .single("code_verifier")?
            .ok_or("code_verifier is required (PKCE)")?
            .to_owned();
        let resource = params.single("resource")?.map(str::to_owned);
        Ok::<_, String>((code, redirect_uri, verifier, resource))
    })();
    let (code, redirect_uri, verifier, resource) = match fields {
        Ok(fields) => fields,
        Err(why) => return invalid_request(&why),
    };
    if !valid_verifier(&verifier) {
        return invalid_request(
            "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636)",
        );
    }
    let (issue, access, refresh) = server.new_tokens();
    let expected_client = client_id.clone();
    let redeemed = server
        .store
        .redeem_code(
            super::opaque::hash_token(&code),
            move |code| {
                if code.client_id != expected_client {
                    return Err(Mismatch::Client);
                }
                if redirect_uri
                    .as_deref()
                    .is_some_and(|uri| uri != code.redirect_uri)
                {
                    return Err(Mismatch::Redirect);
                }
                if !challenge_matches(&verifier, &code.code_challenge) {
                    return Err(Mismatch::Verifier);
                }
                if resource.as_deref().is_some_and(|r| {
                    !super::issuer::same_resource(r, &code.resource)
                        && !super::issuer::within_every_endpoint(&code.resource, r)
                }) {
                    return Err(Mismatch::Resource);
                }
                Ok(())
            },
            issue,
        )
        .await;
    respond(server, redeemed, &client_id, "code", access, refresh)
}

async fn refresh_token(server: &AuthServer, params: &Params, client_id: String) -> Reply {
    let fields = (|| {
        let token = params
            .single("refresh_token")?
            .ok_or("refresh_token is required")?
            .to_owned();
        Ok::<_, String>((
            token,
            params.single("scope")?.map(str::to_owned),
            params.single("resource")?.map(str::to_owned),
        ))
    })();
    let (token, scope, resource) = match fields {
        Ok(fields) => fields,
        Err(why) => return invalid_request(&why),
    };
    let (issue, access, refresh) = server.new_tokens();
    let expected_client = client_id.clone();
    let rotated = server
        .store
        .rotate_refresh(
            super::opaque::hash_token(&token),
            move |grant: &Grant| {
                if grant.client_id != expected_client {
                    return Err(Mismatch::Client);
                }
                if resource.as_deref().is_some_and(|r| {
                    !super::issuer::same_resource(r, &grant.resource)
                        && !super::issuer::within_every_endpoint(&grant.resource, r)
                }) {
                    return Err(Mismatch::Resource);
                }
                let held: Vec<&str> = grant.scope.split(' ').collect();
                if scope.as_deref().is_some_and(|asked| {
                    asked
                        .split(' ')
                        .any(|s| !s.is_empty() && !held.contains(&s))
                }) {
                    return Err(Mismatch::Scope);
                }
                Ok(())
            },
            issue,
        )
        .await;
    respond(
        server,
        rotated,
        &client_id,
        "refresh_token",
        access,
        refresh,
    )
}

fn respond(
    server: &AuthServer,
    result: Result<Redeemed<Mismatch>, super::store::SqlError>,
    client_id: &str,
    what: &str,
    access: String,
    refresh: String,
) -> Reply {
    let grant = match result {
        Ok(Redeemed::Issued(grant, evicted)) => {
            // Older grants made room for this one (--oauth-max-grants).
            server.forget_grants(&evicted);
            grant
        }
        Ok(Redeemed::Replayed(grant_id)) => {
            server.forget_grants(grant_id.as_slice());
            log(client_id, None, "replayed");
            tracing::warn!(
                client_id,
                "a spent {what} was presented again: its whole grant is revoked"
            );
            return invalid_grant(&format!(
                "this {what} was already used; every token of its grant is now revoked: sign in again"
            ));
        }
        Ok(Redeemed::Unknown) => {
            log(client_id, None, "unknown");
            return invalid_grant(&format!("this {what} is not known here"));
        }
        Ok(Redeemed::Expired) => {
            log(client_id, None, "expired");
            return invalid_grant(&format!("this {what} has expired: sign in again"));
        }
        Ok(Redeemed::Revoked) => {
            log(client_id, None, "revoked");
            return invalid_grant("this grant was revoked: sign in again");
        }
        Ok(Redeemed::Refused(mismatch)) => {
            log(client_id, None, "mismatch");
            return invalid_grant(&format!(
                "the {what} is not valid for this request: {}",
                mismatch.describe()
            ));
        }
        Err(why) => return unavailable(&why),
    };
    log(client_id, Some(&grant.principal), "issued");
    let mut body = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": server.config.access_token_ttl.as_secs(),
        "refresh_token": refresh,
    });
    if !grant.scope.is_empty() {
        body["scope"] = json!(grant.scope);
    }
    reply::json(StatusCode::OK, &body)
}

/// RFC 7636 §4.1: 43–128 unreserved characters.
fn valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// `BASE64URL(SHA256(verifier)) == challenge`, in constant time.
fn challenge_matches(verifier: &str, challenge: &str) -> bool {
    let computed = crate::oauth::pkce::challenge_for(verifier);
    #[allow(deprecated)] // the crate's constant-time comparison
    aws_lc_rs::constant_time::verify_slices_are_equal(computed.as_bytes(), challenge.as_bytes())
        .is_ok()
}

fn log(client_id: &str, principal: Option<&str>, outcome: &str) {
    tracing::info!(
        client_id,
        principal = principal.unwrap_or("-"),
        outcome,
        "token request"
    );
}

fn invalid_request(why: &str) -> Reply {
    reply::error(StatusCode::BAD_REQUEST, "invalid_request", why)
}

fn invalid_grant(why: &str) -> Reply {
    reply::error(StatusCode::BAD_REQUEST, "invalid_grant", why)
}

fn unavailable(why: &dyn std::fmt::Display) -> Reply {
    tracing::error!("the authorization server's store failed: {why}");
    reply::error(
        StatusCode::SERVICE_UNAVAILABLE,
        "temporarily_unavailable",
        "the authorization server cannot reach its store; try again shortly",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verifier_is_checked_by_rfc_7636() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert!(valid_verifier(verifier));
        assert!(challenge_matches(
            verifier,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(!challenge_matches(
            verifier,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN"
        ));
        // `plain` would send the verifier itself as the challenge: it never matches.
        assert!(!challenge_matches(verifier, verifier));
        assert!(!valid_verifier("short"));
        assert!(!valid_verifier(&"a".repeat(129)));
        assert!(!valid_verifier(&format!("{}+", "a".repeat(43))));
    }
}
