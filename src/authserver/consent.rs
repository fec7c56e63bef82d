//! The consent step: a page that names the client, the user and the scopes, and a form
//! whose hidden fields are the validated request plus a CSRF token. The token is an HMAC,
//! under a key only this process knows (among replicas, one derived from the cluster key,
//! so the form may be posted to any of them), of the user and every field, with its time: a
//! page from another origin cannot mint one for the victim's identity, and a token works
//! for the exact request it was shown for, for ten minutes.

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::authorization::Authorization;
use super::reply::{self, Reply, escape};

/// How long a consent page stays usable.
pub const CONSENT_LIFETIME_S: i64 = 600;

pub struct Csrf {
    /// Signs with the first; accepts any (a cluster key's previous one, while it rotates).
    keys: Vec<hmac::Key>,
}

impl Csrf {
    /// A key of this process's own, or the cluster's.
    pub fn new(cluster: Option<&crate::cluster_key::ClusterKey>) -> Self {
        let secrets = match cluster {
            Some(cluster) => cluster.secrets("consent-csrf"),
            None => {
                let mut key = [0u8; 32];
                aws_lc_rs::rand::fill(&mut key).expect("the system's random source");
                vec![key]
            }
        };
        Csrf {
            keys: secrets
                .iter()
                .map(|key| hmac::Key::new(hmac::HMAC_SHA256, key))
                .collect(),
        }
    }

    fn tag(&self, user: &str, request: &Authorization, issued_at: i64) -> Vec<u8> {
        self.tag_with(&self.keys[0], user, request, issued_at)
    }

    fn tag_with(
        &self,
        key: &hmac::Key,
        user: &str,
        request: &Authorization,
        issued_at: i64,
    ) -> Vec<u8> {
        let mut context = hmac::Context::with_key(key);
        for field in [
            user,
            &request.client_id,
            &request.redirect_uri,
            &request.code_challenge,
            &request.scope,
            &request.resource,
            request.state.as_deref().unwrap_or(""),
            &issued_at.to_string(),
        ] {
            context.update(&(field.len() as u64).to_be_bytes());
            context.update(field.as_bytes());
        }
        context.sign().as_ref().to_vec()
    }

    pub fn token(&self, user: &str, request: &Authorization, now: i64) -> String {
        format!(
            "{now}.{}",
            URL_SAFE_NO_PAD.encode(self.tag(user, request, now))
        )
    }

    pub fn verify(&self, token: &str, user: &str, request: &Authorization, now: i64) -> bool {
        let Some((issued, tag)) = token.split_once('.') else {
            return false;
        };
        let (Ok(issued_at), Ok(tag)) = (issued.parse::<i64>(), URL_SAFE_NO_PAD.decode(tag)) else {
            return false;
        };
        if now < issued_at || now - issued_at > CONSENT_LIFETIME_S {
            return false;
        }
        self.keys.iter().any(|key| {
            let expected = self.tag_with(key, user, request, issued_at);
            #[allow(deprecated)] // the crate's constant-time comparison
            aws_lc_rs::constant_time::verify_slices_are_equal(&tag, &expected).is_ok()
        })
    }
}

/// The page: who asks, for whom, for what, and where the answer goes.
/// `signed_in_here`: the user came from `--login-oidc` with these groups, so the form
/// carries the name and the groups (which the CSRF tag covers).
pub fn page(
    user: &str,
    signed_in_here: Option<&[String]>,
    request: &Authorization,
    csrf: &str,
    action: &str,
) -> Reply {
    let client = request
        .client_name
        .as_deref()
        .map(|n| format!("<strong>{}</strong>", escape(n)))
        .unwrap_or_else(|| "An unnamed client".into());
    let scopes = if request.scope.is_empty() {
        "<p>It asks for no particular scope: access to the server's tools as you.</p>".to_owned()
    } else {
        let items: String = request
            .scope
            .split(' ')
            .map(|s| format!("<li><code>{}</code></li>", escape(s)))
            .collect();
        format!("<p>It asks for these scopes:</p><ul>{items}</ul>")
    };
    let back_to = url::Url::parse(&request.redirect_uri)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default();
    let mut hidden = String::new();
    let mut field = |name: &str, value: &str| {
        hidden.push_str(&format!(
            "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
            escape(value)
        ));
    };
    field("response_type", "code");
    field("client_id", &request.client_id);
    field("redirect_uri", &request.redirect_uri);
    field("code_challenge", &request.code_challenge);
    field("code_challenge_method", "S256");
    field("scope", &request.scope);
    field("resource", &request.resource);
    if let Some(state) = &request.state {
        field("state", state);
    }
    field("csrf", csrf);
    if let Some(groups) = signed_in_here {
        field("login_user", user);
        if !groups.is_empty() {
            field(
                "login_groups",
                &serde_json::to_string(groups).unwrap_or_default(),
            );
        }
    }
    let body = format!(
        "<h1>Allow access?</h1>\
<p>{client} (client id <code>{client_id}</code>) wants to use <code>{resource}</code> as <strong>{user}</strong>.</p>\
{scopes}<p>Either way you go back to <code>{back}</code>.</p>\
<form method=\"post\" action=\"{action}\">{hidden}\
<button type=\"submit\" name=\"decision\" value=\"approve\">Allow</button>\
<button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>",
        client_id = escape(&request.client_id),
        // `…/*`: every endpoint of a `serve --config` listener.
        resource = match super::issuer::every_endpoint_base(&request.resource) {
            Some(base) => format!("every server of this gateway ({}/…)", escape(base)),
            None => escape(&request.resource),
        },
        user = escape(user),
        back = escape(&back_to),
        action = escape(action),
    );
    reply::page(http::StatusCode::OK, "Allow access?", &body, &[&back_to])
}
