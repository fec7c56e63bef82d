//! Dynamic client registration (RFC 7591): public clients only (no secret is issued:
//! PKCE protects the code), redirect URIs as `redirect` allows, a bounded table (the
//! oldest client not in use is recycled; when all are in use, registration waits). Bad metadata gets `invalid_redirect_uri` or
//! `invalid_client_metadata` with what would work.

use http::StatusCode;
use serde_json::{Value, json};

use super::client::ClientRecord;
use super::reply::{self, Reply};
use super::server::AuthServer;

const MAX_NAME: usize = 200;
const MAX_REDIRECT_URIS: usize = 16;

pub async fn register(server: &AuthServer, body: &[u8]) -> Reply {
    let record = match validate(server, body) {
        Ok(record) => record,
        Err((code, description)) => {
            tracing::info!(outcome = code, reason = %description, "client registration refused");
            return reply::error(StatusCode::BAD_REQUEST, code, &description);
        }
    };
    let client_id = super::opaque::random_token();
    let metadata = serde_json::to_string(&record).expect("a client record serializes");
    match server
        .store
        .register_client(client_id.clone(), metadata)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(
                "--oauth-max-clients reached and every client is in use: a registration was refused"
            );
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "this server already holds as many clients as it keeps (--oauth-max-clients), each in use; try again later",
            );
        }
        Err(e) => {
            tracing::error!("cannot record a client: {e}");
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "the authorization server cannot reach its store; try again shortly",
            );
        }
    }
    tracing::info!(client_id = %client_id, client_name = record.client_name.as_deref().unwrap_or("-"), "client registered");
    let mut answer = json!({
        "client_id": client_id,
        "client_id_issued_at": super::store::now(),
        "redirect_uris": record.redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    });
    if let Some(name) = &record.client_name {
        answer["client_name"] = json!(name);
    }
    reply::json(StatusCode::CREATED, &answer)
}

fn validate(server: &AuthServer, body: &[u8]) -> Result<ClientRecord, (&'static str, String)> {
    let metadata: Value = serde_json::from_slice(body).map_err(|_| {
        (
            "invalid_client_metadata",
            "the body must be a JSON object of client metadata (RFC 7591), e.g. {\"redirect_uris\": [\"http://127.0.0.1:PORT/callback\"]}".to_owned(),
        )
    })?;
    let Some(metadata) = metadata.as_object() else {
        return Err((
            "invalid_client_metadata",
            "the body must be a JSON object".into(),
        ));
    };
    let uris = metadata
        .get("redirect_uris")
        .and_then(Value::as_array)
        .filter(|uris| !uris.is_empty())
        .ok_or((
            "invalid_redirect_uri",
            "redirect_uris must be a non-empty array of URIs".to_owned(),
        ))?;
    if uris.len() > MAX_REDIRECT_URIS {
        return Err((
            "invalid_redirect_uri",
            format!("at most {MAX_REDIRECT_URIS} redirect_uris"),
        ));
    }
    let mut redirect_uris = Vec::new();
    for uri in uris {
        let uri = uri.as_str().ok_or((
            "invalid_redirect_uri",
            "each redirect URI must be a string".to_owned(),
        ))?;
        super::redirect::check_registrable(uri, &server.config.allowed_redirect_uris)
            .map_err(|why| ("invalid_redirect_uri", why))?;
        redirect_uris.push(uri.to_owned());
    }
    if let Some(method) = metadata.get("token_endpoint_auth_method")
        && method.as_str() != Some("none")
    {
        return Err((
            "invalid_client_metadata",
            "only public clients are registered: token_endpoint_auth_method must be \"none\" (PKCE protects the code)".into(),
        ));
    }
    if let Some(types) = metadata.get("grant_types") {
        let ok = types.as_array().is_some_and(|t| {
            t.iter()
                .all(|g| matches!(g.as_str(), Some("authorization_code" | "refresh_token")))
        });
        if !ok {
            return Err((
                "invalid_client_metadata",
                "grant_types may hold only \"authorization_code\" and \"refresh_token\"".into(),
            ));
        }
    }
    if let Some(types) = metadata.get("response_types") {
        let ok = types
            .as_array()
            .is_some_and(|t| t.iter().all(|r| r.as_str() == Some("code")));
        if !ok {
            return Err((
                "invalid_client_metadata",
                "response_types may hold only \"code\"".into(),
            ));
        }
    }
    let client_name = match metadata.get("client_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name))
            if name.chars().count() <= MAX_NAME && !name.chars().any(char::is_control) =>
        {
            Some(name.clone())
        }
        Some(_) => {
            return Err((
                "invalid_client_metadata",
                format!(
                    "client_name must be a string of at most {MAX_NAME} characters without control characters"
                ),
            ));
        }
    };
    Ok(ClientRecord {
        redirect_uris,
        client_name,
    })
}
