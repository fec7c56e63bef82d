//! Token revocation (RFC 7009): a refresh token ends its whole grant, an access token ends
//! itself. The answer is 200 whatever was found (a client must not learn which tokens
//! exist), once the request is well formed and names a registered client.

use http::StatusCode;

use super::form::Params;
use super::reply::{self, Reply};
use super::server::AuthServer;
use super::store::Revoked;

pub async fn revoke(server: &AuthServer, body: &[u8]) -> Reply {
    let params = Params::parse(body);
    let (token, client_id) = match (params.single("token"), params.single("client_id")) {
        (Ok(Some(token)), Ok(Some(client_id))) => (token.to_owned(), client_id.to_owned()),
        (Err(why), _) | (_, Err(why)) => {
            return reply::error(StatusCode::BAD_REQUEST, "invalid_request", &why);
        }
        _ => {
            return reply::error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "send token and client_id (public clients name themselves)",
            );
        }
    };
    match server.client(&client_id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return reply::error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "this client is not registered here",
            );
        }
        Err(lookup) => return lookup.reply(),
    }
    match server
        .store
        .revoke(super::opaque::hash_token(&token), client_id.clone())
        .await
    {
        Ok(found) => {
            let outcome = match &found {
                Revoked::Grant(grant_id) => {
                    server.forget_grants(std::slice::from_ref(grant_id));
                    "grant_revoked"
                }
                Revoked::Access => {
                    server.forget_token(&token);
                    "access_revoked"
                }
                Revoked::Nothing => "nothing",
            };
            tracing::info!(client_id = %client_id, outcome, "revocation");
            reply::json(StatusCode::OK, &serde_json::json!({}))
        }
        Err(why) => {
            tracing::error!("the authorization server's store failed: {why}");
            reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "the authorization server cannot reach its store; try again shortly",
            )
        }
    }
}
