//! A protected server's refusal answered: what it asks of its callers, found the way
//! `login` finds it (the challenge, the protected resource metadata, the authorization
//! server's metadata), then the credential given, the stored login, or (with `--oauth`)
//! a new login, and the request again. Only names and flags reach the report.

use std::time::Instant;

use http::header::WWW_AUTHENTICATE;
use http::{HeaderMap, StatusCode};

use super::config::CheckConfig;
use super::failure::{Failed, failed, unreachable};
use super::report::{Auth, Login, Report};
use super::wire::{self, Wire};
use crate::oauth::challenge::{self, Challenge};
use crate::oauth::discovery;
use crate::oauth::flow::ServerAuth;
use crate::oauth::provider::TokenProvider;
use crate::oauth::token::unix_now;

/// The Bearer challenge of a refusal, if it carried one.
fn challenge_in(headers: &HeaderMap) -> Option<Challenge> {
    challenge::bearer(
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// Fills `auth` with what discovery finds for this server.
async fn discover(auth: &mut Auth, server: &ServerAuth, challenge: Option<&Challenge>) {
    auth.resource_metadata = challenge.and_then(|c| c.resource_metadata.clone());
    auth.scope_challenged = challenge.and_then(|c| c.scope.clone());
    match discovery::discover(&server.http, &server.server, challenge).await {
        Ok(found) => {
            if let Some(resource) = &found.resource {
                auth.resource = resource.resource.clone();
                auth.authorization_servers = resource.authorization_servers.clone();
                auth.scopes_supported = resource.scopes_supported.clone();
            }
            let issuer = &found.server;
            if auth.authorization_servers.is_empty() {
                auth.authorization_servers = vec![issuer.issuer.clone()];
            }
            auth.issuer = Some(issuer.issuer.clone());
            if auth.scopes_supported.is_none() {
                auth.scopes_supported = issuer.scopes_supported.clone();
            }
            auth.grant_types_supported = issuer.grant_types_supported.clone();
            auth.dynamic_registration = issuer.registration_endpoint.is_some();
            auth.client_id_metadata_documents = issuer.client_id_metadata_documents;
            auth.device_flow = issuer.device_authorization_endpoint.is_some();
            auth.legacy_defaults = found.legacy_defaults;
        }
        Err(problem) => {
            // What the resource metadata said is still worth reporting.
            if let Some(resource) =
                discovery::protected_resource(&server.http, &server.server, challenge).await
            {
                auth.resource = resource.resource.clone();
                auth.authorization_servers = resource.authorization_servers.clone();
                auth.scopes_supported = resource.scopes_supported.clone();
            }
            auth.problem = Some(problem);
        }
    }
}

/// The stored login for this server, described (never its tokens).
fn stored_login(server: &ServerAuth) -> Option<Login> {
    let grant = server.stored().ok().flatten()?;
    Some(Login {
        issuer: grant.issuer.clone(),
        client_id: grant.client_id.clone(),
        scope: grant.scope.clone(),
        expires_in_s: grant.expires_at.map(|at| at as i64 - unix_now() as i64),
        refreshable: grant.refresh_token.is_some(),
    })
}

/// A 401/403 to the first request: what the server asks for, then the stored login (or
/// the one given) and the request again.
pub(super) async fn authenticate(
    config: &CheckConfig,
    report: &mut Report,
    wire: &mut Wire,
    refused: wire::Posted,
) -> Result<wire::Posted, Failed> {
    let challenge = challenge_in(&refused.headers);
    report.auth.required = true;
    let oauth = server_auth(config)?;
    discover(&mut report.auth, &oauth, challenge.as_ref()).await;
    report.auth.login = stored_login(&oauth);
    let login = format!("mcp-stdio login {}", config.url);
    let has_server = report.auth.issuer.is_some();
    if let Some(given) = config.headers.get(http::header::AUTHORIZATION) {
        report.auth.credential = config.credential;
        return with_given_credential(config, wire, given.clone(), has_server, &login).await;
    }
    // A new login is run only when this check was allowed to run one: `--oauth` (a
    // browser) or a client that logs in by itself (client credentials).
    let may_log_in = config.oauth.interactive || oauth.unattended();
    if report.auth.login.is_none() && !may_log_in {
        let hint = if has_server {
            format!("needs a login: run `{login}` (or check again with --oauth)")
        } else {
            "needs a bearer token: pass --bearer-token (or MCP_BEARER_TOKEN) or -H 'Authorization: Bearer …'".to_owned()
        };
        return Err(failed(
            format!("HTTP {}: the server requires authorization", refused.status),
            hint,
        ));
    }
    let provider = TokenProvider::new(oauth, config.oauth.interactive);
    let value = match provider.authorization().await {
        Some(value) => {
            report.auth.credential = "stored-login";
            value
        }
        None if may_log_in => {
            let started = Instant::now();
            let value = provider
                .after_unauthorized(None, challenge)
                .await
                .map_err(|e| {
                    failed(
                        format!("the login failed: {e}"),
                        format!("run `{login}` in a terminal to see each step"),
                    )
                })?;
            wire.note("login", None, started);
            report.auth.credential = "new-login";
            report.auth.login = stored_login(provider.server_auth());
            value
        }
        None => {
            return Err(failed(
                "the stored login could not be used (it expired and could not be refreshed)",
                format!("log in again: run `{login}` (or check again with --oauth)"),
            ));
        }
    };
    wire.authorization = Some(value.clone());
    let again = wire
        .discover()
        .await
        .map_err(|e| unreachable(&config.url, &e))?;
    if again.status != StatusCode::UNAUTHORIZED {
        return refused_or(again, &login);
    }
    // Refused although fresh-looking: refresh once, as the relay would.
    match provider
        .after_unauthorized(Some(&value), challenge_in(&again.headers))
        .await
    {
        Ok(fresh) => {
            wire.authorization = Some(fresh);
            let third = wire
                .discover()
                .await
                .map_err(|e| unreachable(&config.url, &e))?;
            refused_or(third, &login)
        }
        Err(_) => Err(failed(
            "the server refused the stored login's access token, and it could not be refreshed",
            format!("log in again: run `{login}`"),
        )),
    }
}

/// The request again with the credential given on the command line, which is not
/// replaced: a refusal says what to change.
async fn with_given_credential(
    config: &CheckConfig,
    wire: &mut Wire,
    given: http::HeaderValue,
    has_server: bool,
    login: &str,
) -> Result<wire::Posted, Failed> {
    wire.authorization = Some(crate::oauth::presented::Presented::given(given));
    let again = wire
        .discover()
        .await
        .map_err(|e| unreachable(&config.url, &e))?;
    if !matches!(again.status.as_u16(), 401 | 403) {
        return Ok(again);
    }
    Err(failed(
        format!("HTTP {} to the credential given", again.status),
        if again.status == StatusCode::FORBIDDEN {
            "the credential lacks a permission (scope) this server needs".to_owned()
        } else if has_server {
            format!(
                "the token is not accepted; get a new one, or run `{login}` and leave --bearer-token out"
            )
        } else {
            "the token is not accepted; check it with the server's operator".to_owned()
        },
    ))
}

fn refused_or(posted: wire::Posted, login: &str) -> Result<wire::Posted, Failed> {
    match posted.status.as_u16() {
        401 => Err(failed(
            "the server refused the stored login's access token",
            format!("log in again: run `{login}`"),
        )),
        403 => Err(failed(
            "HTTP 403: the stored login lacks a permission (scope) this server needs",
            format!("log in again with the scope it needs: run `{login} --scope '…'`"),
        )),
        _ => Ok(posted),
    }
}

/// The login state of the server being checked (the token store opened on demand).
fn server_auth(config: &CheckConfig) -> Result<ServerAuth, Failed> {
    config
        .oauth
        .server_auth(
            config.client.clone(),
            config.max_message_size,
            config.url.clone(),
        )
        .map_err(|e| failed(e, "check --token-store (auto, keyring or file)"))
}
