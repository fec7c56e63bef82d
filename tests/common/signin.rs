//! A public OAuth client and a scripted browser for `serve --enable-oauth`: registers,
//! opens the authorization URL, reads the consent page's form and submits it, follows
//! the redirect, and redeems the code — the same requests a real client and browser make.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::serve::{Answer, Serve};

pub const REDIRECT: &str = "http://127.0.0.1:7777/callback";

pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Pkce {
    pub fn new() -> Self {
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).unwrap();
        let verifier = URL_SAFE_NO_PAD.encode(bytes);
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
        Pkce {
            challenge: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            verifier,
        }
    }
}

pub struct Tokens {
    pub access: String,
    pub refresh: String,
    pub body: Value,
}

/// Registers a client with `REDIRECT`; its client id.
pub async fn register(serve: &Serve) -> String {
    let answer = serve
        .send(
            "POST",
            "/register",
            &[],
            &json!({"redirect_uris": [REDIRECT], "client_name": "test client"}).to_string(),
        )
        .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.json()["client_id"].as_str().unwrap().to_owned()
}

/// The authorization URL's path and query for `client_id`, with `extra` parameters.
pub fn authorize_path(client_id: &str, pkce: &Pkce, extra: &[(&str, &str)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.extend_pairs([
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("state", "st4te"),
        ("code_challenge", pkce.challenge.as_str()),
        ("code_challenge_method", "S256"),
    ]);
    query.extend_pairs(extra);
    format!("/authorize?{}", query.finish())
}

/// The hidden fields of the consent page's form.
pub fn form_fields(page: &str) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    for input in page.split("<input ").skip(1) {
        let attr = |name: &str| {
            let start = input.find(&format!("{name}=\""))? + name.len() + 2;
            let end = input[start..].find('"')? + start;
            Some(unescape(&input[start..end]))
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            fields.push((name, value));
        }
    }
    fields
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Opens the consent page and answers it with `decision`; the answer (a redirect).
pub async fn consent(
    serve: &Serve,
    path: &str,
    headers: &[(&str, &str)],
    decision: &str,
) -> Answer {
    let page = serve.send("GET", path, headers, "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let mut fields = form_fields(&page.body);
    fields.push(("decision".into(), decision.into()));
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    serve.send_form("/authorize", headers, &pairs).await
}

/// A query parameter of a redirect's `Location`.
pub fn location_param(answer: &Answer, name: &str) -> Option<String> {
    let location = answer.headers.get("location")?.to_str().ok()?;
    let url = url::Url::parse(location).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Approves at the consent page: the code.
pub async fn code_for(
    serve: &Serve,
    client_id: &str,
    pkce: &Pkce,
    extra: &[(&str, &str)],
) -> String {
    let answer = consent(
        serve,
        &authorize_path(client_id, pkce, extra),
        &[],
        "approve",
    )
    .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(location_param(&answer, "state").as_deref(), Some("st4te"));
    location_param(&answer, "code").expect("a code in the redirect")
}

pub async fn redeem(serve: &Serve, client_id: &str, code: &str, verifier: &str) -> Answer {
    serve
        .send_form(
            "/token",
            &[],
            &[
                ("grant_type", "authorization_code"),
                ("client_id", client_id),
                ("code", code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", verifier),
            ],
        )
        .await
}

pub async fn refresh(serve: &Serve, client_id: &str, refresh_token: &str) -> Answer {
    serve
        .send_form(
            "/token",
            &[],
            &[
                ("grant_type", "refresh_token"),
                ("client_id", client_id),
                ("refresh_token", refresh_token),
            ],
        )
        .await
}

pub fn tokens(answer: &Answer) -> Tokens {
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body = answer.json();
    Tokens {
        access: body["access_token"].as_str().unwrap().to_owned(),
        refresh: body["refresh_token"].as_str().unwrap().to_owned(),
        body,
    }
}

/// The whole sign-in: register, consent, redeem.
pub async fn sign_in(serve: &Serve) -> (String, Tokens) {
    let client_id = register(serve).await;
    let pkce = Pkce::new();
    let code = code_for(serve, &client_id, &pkce, &[]).await;
    let tokens = tokens(&redeem(serve, &client_id, &code, &pkce.verifier).await);
    (client_id, tokens)
}
