//! The authorization endpoint: GET validates the request and shows the consent page; the
//! page's POST checks its CSRF token, re-validates everything, and sends the browser back
//! with a code (or `access_denied`). Requests that cannot be sent back safely — unknown
//! client, unregistered redirect — get a 400 page, never a redirect. Only `code` with
//! PKCE S256; the code is bound to client, redirect, challenge, user, scope and resource
//! and lives 60 seconds.

use http::{HeaderMap, StatusCode};

use super::authorization::Authorization;
use super::client::ClientRecord;
use super::form::Params;
use super::issuer::Issuer;
use super::reply::{self, Reply};
use super::server::AuthServer;
use super::store::Code;
use super::users::NoUser;

/// How long a code may wait to be redeemed.
pub const CODE_LIFETIME_S: i64 = 60;

/// What is wrong with a request: shown on a page, or sent back to the client.
enum Invalid {
    Page(String),
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: &'static str,
        description: String,
    },
}

pub struct Context<'a> {
    pub headers: &'a HeaderMap,
    pub trusted_peer: bool,
    pub issuer: &'a Issuer,
}

pub async fn show(server: &AuthServer, query: &[u8], cx: &Context<'_>) -> Reply {
    let request = match validate(server, &Params::parse(query), cx.issuer).await {
        Ok(request) => request,
        Err(invalid) => return refuse(invalid, cx.issuer),
    };
    if let Some(login) = &server.login {
        // Users sign in at the OpenID provider first; the consent page comes after.
        let query = String::from_utf8_lossy(query);
        return match login
            .start(&query, &cx.issuer.endpoint("login-callback"))
            .await
        {
            Ok(location) => reply::redirect(&location),
            Err(why) => {
                tracing::warn!(reason = %why, "cannot send the user to the identity provider");
                refuse(
                    back(
                        &request,
                        "temporarily_unavailable",
                        "the identity provider cannot be reached".into(),
                    ),
                    cx.issuer,
                )
            }
        };
    }
    let user = match server.config.users.who(cx.headers, cx.trusted_peer) {
        Ok(user) => user,
        Err(nobody) => return no_user(nobody, &request, cx.issuer),
    };
    consent_page(server, &user, None, &request, cx)
}

/// Back from the OpenID provider: the user is who its id_token says; the consent page
/// for the request the sign-in started from.
pub async fn after_login(server: &AuthServer, query: &[u8], cx: &Context<'_>) -> Reply {
    let Some(login) = &server.login else {
        return reply::problem_page(StatusCode::NOT_FOUND, "no sign-in is configured");
    };
    let signed_in = match login
        .finish(&Params::parse(query), &cx.issuer.endpoint("login-callback"))
        .await
    {
        Ok(signed_in) => signed_in,
        Err(why) => {
            tracing::info!(reason = %why, outcome = "login_failed", "sign-in refused");
            return reply::problem_page(StatusCode::FORBIDDEN, &why);
        }
    };
    tracing::info!(principal = %signed_in.user, groups = signed_in.groups.len(), outcome = "signed_in", "sign-in at the identity provider");
    let original = Params::parse(signed_in.query.as_bytes());
    let request = match validate(server, &original, cx.issuer).await {
        Ok(request) => request,
        Err(invalid) => return refuse(invalid, cx.issuer),
    };
    let groups = Some(signed_in.groups.as_slice());
    consent_page(server, &signed_in.user, groups, &request, cx)
}

/// What the consent form's CSRF tag binds the approver to: the user; with --login-oidc
/// the user and the groups the provider said, which the form carries, as one JSON array
/// (so no other name and list read as the same, and neither can be changed).
fn csrf_subject(user: &str, carried_groups: Option<&[String]>) -> String {
    match carried_groups {
        Some(groups) => serde_json::to_string(&(user, groups)).unwrap_or_default(),
        None => user.to_owned(),
    }
}

/// What the browser gets when nobody is signed in: the client is told (`access_denied`),
/// except for a proxy header that names more than one user, which gets a 400 page.
fn no_user(nobody: NoUser, request: &Authorization, issuer: &Issuer) -> Reply {
    match nobody {
        NoUser::Absent(why) => refuse(back(request, "access_denied", why), issuer),
        NoUser::Ambiguous(why) => reply::problem_page(StatusCode::BAD_REQUEST, &why),
    }
}

/// The consent page for `user`, with a fresh CSRF token for exactly this request.
/// `signed_in_here`: the groups of a --login-oidc sign-in (the form carries the user and
/// them); `None` for a user the proxy (or --dev-user) names again when the form is posted.
fn consent_page(
    server: &AuthServer,
    user: &str,
    signed_in_here: Option<&[String]>,
    request: &Authorization,
    cx: &Context<'_>,
) -> Reply {
    let subject = csrf_subject(user, signed_in_here);
    let csrf = server.csrf.token(&subject, request, super::store::now());
    let action = cx.issuer.endpoint("authorize");
    super::consent::page(user, signed_in_here, request, &csrf, &action)
}

/// Who approves the consent form, their groups, and what its CSRF tag must bind. With
/// --login-oidc the user and groups are the ones the consent page was made for (the form
/// carries them and the tag covers them, so neither can be changed); otherwise the proxy
/// says both again as the form is posted (no groups from --dev-user). The grant keeps the
/// groups.
fn approving(
    server: &AuthServer,
    params: &Params,
    request: &Authorization,
    cx: &Context<'_>,
) -> Result<(String, Vec<String>, String), Box<Reply>> {
    if server.login.is_some() {
        let user = params
            .single("login_user")
            .ok()
            .flatten()
            .filter(|user| !user.chars().any(char::is_control));
        let groups = match params.single("login_groups") {
            Ok(None) => Some(Vec::new()),
            Ok(Some(json)) => serde_json::from_str::<Vec<String>>(json).ok(),
            Err(_) => None,
        };
        return match (user, groups) {
            (Some(user), Some(groups)) => {
                let subject = csrf_subject(user, Some(&groups));
                Ok((user.to_owned(), groups, subject))
            }
            _ => Err(Box::new(reply::problem_page(
                StatusCode::BAD_REQUEST,
                "this consent form is not from a sign-in here; start again from your application",
            ))),
        };
    }
    let users = &server.config.users;
    let refused = |nobody| Box::new(no_user(nobody, request, cx.issuer));
    let user = users.who(cx.headers, cx.trusted_peer).map_err(refused)?;
    let groups = users.groups(cx.headers, cx.trusted_peer).map_err(refused)?;
    Ok((user.clone(), groups, user))
}

pub async fn decide(server: &AuthServer, body: &[u8], cx: &Context<'_>) -> Reply {
    let params = Params::parse(body);
    let request = match validate(server, &params, cx.issuer).await {
        Ok(request) => request,
        Err(invalid) => return refuse(invalid, cx.issuer),
    };
    let (user, groups, subject) = match approving(server, &params, &request, cx) {
        Ok(signed_in) => signed_in,
        Err(reply) => return *reply,
    };
    let csrf = params.single("csrf").ok().flatten().unwrap_or("");
    if !server
        .csrf
        .verify(csrf, &subject, &request, super::store::now())
    {
        tracing::info!(client_id = %request.client_id, principal = %user, outcome = "csrf", "consent refused");
        return reply::problem_page(
            StatusCode::BAD_REQUEST,
            "This consent form is stale or was not shown to you by this server. Start the sign-in again from your application.",
        );
    }
    if params.single("decision").ok().flatten() != Some("approve") {
        tracing::info!(client_id = %request.client_id, principal = %user, outcome = "denied", "consent");
        return refuse(
            back(&request, "access_denied", "the user denied access".into()),
            cx.issuer,
        );
    }
    let code = super::opaque::random_token();
    let stored = server
        .store
        .add_code(
            super::opaque::hash_token(&code),
            Code {
                client_id: request.client_id.clone(),
                principal: user.clone(),
                scope: request.scope.clone(),
                resource: request.resource.clone(),
                redirect_uri: request.redirect_uri.clone(),
                code_challenge: request.code_challenge.clone(),
                expires_at: super::store::now() + CODE_LIFETIME_S,
                groups,
            },
        )
        .await;
    match stored {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!("--oauth-max-pending-codes reached: a code was refused");
            return refuse(
                back(
                    &request,
                    "temporarily_unavailable",
                    "too many sign-ins are in progress; try again in a minute".into(),
                ),
                cx.issuer,
            );
        }
        Err(e) => {
            tracing::error!("cannot store a code: {e}");
            return refuse(
                back(
                    &request,
                    "temporarily_unavailable",
                    "the authorization server cannot reach its store".into(),
                ),
                cx.issuer,
            );
        }
    }
    tracing::info!(client_id = %request.client_id, principal = %user, scope = %request.scope, outcome = "approved", "consent");
    let mut location = url::Url::parse(&request.redirect_uri).expect("validated");
    {
        let mut query = location.query_pairs_mut();
        query.append_pair("code", &code);
        if let Some(state) = &request.state {
            query.append_pair("state", state);
        }
        if cx.issuer.is_https() {
            query.append_pair("iss", &cx.issuer.identifier());
        }
    }
    reply::redirect(location.as_str())
}

fn back(request: &Authorization, error: &'static str, description: String) -> Invalid {
    Invalid::Redirect {
        redirect_uri: request.redirect_uri.clone(),
        state: request.state.clone(),
        error,
        description,
    }
}

fn refuse(invalid: Invalid, issuer: &Issuer) -> Reply {
    match invalid {
        Invalid::Page(what) => {
            tracing::info!(reason = %what, "authorization request refused (shown, not redirected)");
            reply::problem_page(StatusCode::BAD_REQUEST, &what)
        }
        Invalid::Redirect {
            redirect_uri,
            state,
            error,
            description,
        } => {
            tracing::info!(outcome = error, reason = %description, "authorization request refused");
            let mut location = url::Url::parse(&redirect_uri).expect("validated");
            {
                let mut query = location.query_pairs_mut();
                query.append_pair("error", error);
                query.append_pair("error_description", &description);
                if let Some(state) = &state {
                    query.append_pair("state", state);
                }
                if issuer.is_https() {
                    query.append_pair("iss", &issuer.identifier());
                }
            }
            reply::redirect(location.as_str())
        }
    }
}

/// The client and where its answer goes: until both are known, a problem is shown on a page
/// (it cannot be sent back to a redirect URI nobody vouched for).
async fn client_and_redirect(
    server: &AuthServer,
    params: &Params,
) -> Result<(String, ClientRecord, String), Invalid> {
    let single = |name: &str| params.single(name).map_err(Invalid::Page);
    let client_id = single("client_id")?
        .ok_or_else(|| Invalid::Page("the request names no client_id".into()))?
        .to_owned();
    let client: ClientRecord = server
        .client(&client_id)
        .await
        .map_err(|e| Invalid::Page(e.describe()))?.ok_or_else(|| {
        Invalid::Page(format!(
            "the client '{client_id}' is not registered here; the application must register again (its registration may have been recycled)"
        ))
    })?;
    let redirect_uri = match single("redirect_uri")? {
        Some(uri) if super::redirect::matches(uri, &client.redirect_uris) => uri.to_owned(),
        Some(uri) => {
            return Err(Invalid::Page(format!(
                "the redirect URI '{uri}' is not one this client registered"
            )));
        }
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        None => {
            return Err(Invalid::Page(
                "the request has no redirect_uri and the client registered several".into(),
            ));
        }
    };
    Ok((client_id, client, redirect_uri))
}

async fn validate(
    server: &AuthServer,
    params: &Params,
    issuer: &Issuer,
) -> Result<Authorization, Invalid> {
    let (client_id, client, redirect_uri) = client_and_redirect(server, params).await?;
    // From here on, errors go back to the client.
    let (state, doubled_state) = match params.single("state") {
        Ok(state) => (state.map(str::to_owned), None),
        Err(why) => (None, Some(why)),
    };
    let partial = Authorization {
        client_id,
        client_name: client.client_name,
        redirect_uri,
        state,
        code_challenge: String::new(),
        scope: String::new(),
        resource: String::new(),
    };
    let fail = |error: &'static str, description: String| back(&partial, error, description);
    let get = |name: &str| {
        params
            .single(name)
            .map_err(|why| fail("invalid_request", why))
    };
    if let Some(why) = doubled_state {
        return Err(fail("invalid_request", why));
    }
    if get("response_type")? != Some("code") {
        return Err(fail(
            "unsupported_response_type",
            "only response_type=code is supported".into(),
        ));
    }
    match get("code_challenge_method")? {
        Some("S256") => {}
        Some(other) => {
            return Err(fail(
                "invalid_request",
                format!("code_challenge_method {other} is not accepted: use S256"),
            ));
        }
        None => {
            return Err(fail(
                "invalid_request",
                "PKCE is required: send code_challenge and code_challenge_method=S256".into(),
            ));
        }
    }
    let challenge = get("code_challenge")?
        .filter(|c| {
            c.len() == 43
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .ok_or_else(|| {
            fail(
                "invalid_request",
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)"
                    .into(),
            )
        })?
        .to_owned();
    let resource = server
        .resource_for(get("resource")?, issuer)
        .map_err(|why| fail("invalid_target", why))?;
    let scope = server.grantable_scope(get("scope")?);
    Ok(Authorization {
        code_challenge: challenge,
        scope,
        resource,
        ..partial
    })
}
