//! What a protected server asks of its callers, found the way `login` finds it (the
//! challenge, the protected resource metadata, the authorization server's metadata), and
//! what the stored login for it looks like. Only names and flags reach the report.

use http::HeaderMap;
use http::header::WWW_AUTHENTICATE;

use super::report::{Auth, Login};
use crate::oauth::challenge::{self, Challenge};
use crate::oauth::discovery;
use crate::oauth::flow::ServerAuth;
use crate::oauth::token::unix_now;

/// The Bearer challenge of a refusal, if it carried one.
pub fn challenge_in(headers: &HeaderMap) -> Option<Challenge> {
    challenge::bearer(
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// Fills `auth` with what discovery finds for this server.
pub async fn discover(auth: &mut Auth, server: &ServerAuth, challenge: Option<&Challenge>) {
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
pub fn stored_login(server: &ServerAuth) -> Option<Login> {
    let grant = server.stored().ok().flatten()?;
    Some(Login {
        issuer: grant.issuer.clone(),
        client_id: grant.client_id.clone(),
        scope: grant.scope.clone(),
        expires_in_s: grant.expires_at.map(|at| at as i64 - unix_now() as i64),
        refreshable: grant.refresh_token.is_some(),
    })
}
