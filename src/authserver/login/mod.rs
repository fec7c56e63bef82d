//! `--login-oidc`: the embedded server signs users in at the organisation's OpenID
//! provider. `/authorize` with no user sends the browser there (code flow with PKCE, a
//! nonce, and a state good for ten minutes); the provider sends it back to
//! `/login-callback`, where the code is exchanged (as a confidential client), the id_token
//! verified (`id_token.rs`), the principal taken from `--principal-claim` and checked
//! against `--allow-user` / `--allow-domain`, and the consent page shown for the original
//! request. The pending sign-in is not remembered here but sealed into the `state` itself:
//! with the cluster key among replicas (the provider may send the browser back to any of
//! them), with a key of the process's own otherwise. So there is no table of pending
//! sign-ins for anyone to fill or flush, and nothing to bound.

pub mod claims;
mod id_token;
mod provider;

use std::time::Duration;

use url::Url;

use super::form::Params;
use crate::cluster_key::{ClusterKey, Sealer};
use crate::secret::Secret;

/// How long a browser may take at the provider.
const PENDING_FOR: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub struct LoginConfig {
    /// `--login-oidc`: the provider's issuer identifier.
    pub issuer: Url,
    /// `MCP_STDIO_LOGIN_CLIENT_ID` / `_SECRET`: this server's client at the provider.
    pub client_id: String,
    pub client_secret: Secret,
    /// `--principal-claim`: the id_token claim that names the user (`sub` by default).
    pub principal_claim: String,
    /// `--principal-claim-verified`: the operator vouches that the provider checks the
    /// principal claim and users cannot change it (required for a claim that is neither a
    /// stable subject nor `email`).
    pub principal_claim_verified: bool,
    /// `--allow-user`: only these principals (empty: any).
    pub allowed_users: Vec<String>,
    /// `--allow-domain`: only users whose verified `email` is in one of these domains.
    pub allowed_domains: Vec<String>,
    /// `--login-groups-claim`: the claim that lists the user's groups, if any.
    pub groups_claim: Option<String>,
    /// `--max-user-groups`.
    pub max_groups: usize,
    pub http: crate::http::client::ClientOptions,
}

/// A user the provider signed in: who, their groups (`--login-groups-claim`), and the
/// `/authorize` query the sign-in started from.
#[derive(Debug)]
pub struct SignedIn {
    pub user: String,
    pub groups: Vec<String>,
    pub query: String,
}

/// A sign-in sent to the provider and not back yet.
struct Pending {
    /// The original `/authorize` query, replayed when the user is back.
    query: String,
    nonce: String,
    verifier: Secret,
}

/// A pending sign-in as sealed into its `state`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sealed {
    query: String,
    nonce: String,
    verifier: String,
    /// Unix seconds after which the sign-in is over.
    until: u64,
}

pub struct OidcLogin {
    config: LoginConfig,
    provider: provider::Provider,
    verifier: id_token::Verifier,
    /// Seals pending sign-ins into their `state`.
    sealer: Sealer,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl OidcLogin {
    /// `cluster` seals among replicas; a single server seals with a key of its own.
    pub fn new(config: LoginConfig, cluster: Option<Sealer>) -> Self {
        OidcLogin {
            provider: provider::Provider::new(config.issuer.clone(), config.http.clone()),
            verifier: id_token::Verifier::new(&config),
            sealer: cluster.unwrap_or_else(|| ClusterKey::random().sealer("login-state")),
            config,
        }
    }

    /// The `state` that carries a pending sign-in.
    fn remember(&self, pending: Pending) -> String {
        let sealed = Sealed {
            query: pending.query,
            nonce: pending.nonce,
            verifier: pending.verifier.expose().to_owned(),
            until: unix_now() + PENDING_FOR.as_secs(),
        };
        self.sealer
            .seal(&serde_json::to_vec(&sealed).expect("plain fields serialize"))
    }

    /// The pending sign-in a `state` carries, if it is ours and not over.
    fn recall(&self, state: &str) -> Option<Pending> {
        let sealed: Sealed = serde_json::from_slice(&self.sealer.open(state)?).ok()?;
        (unix_now() <= sealed.until).then(|| Pending {
            query: sealed.query,
            nonce: sealed.nonce,
            verifier: Secret::new(sealed.verifier),
        })
    }

    /// Where to send the browser to sign in, for the `/authorize` request `query`.
    pub async fn start(&self, query: &str, callback: &str) -> Result<String, String> {
        let endpoints = self.provider.endpoints().await?;
        let nonce = super::opaque::random_token();
        let pkce = crate::oauth::pkce::Pkce::generate();
        let pending = Pending {
            query: query.to_owned(),
            nonce: nonce.clone(),
            verifier: pkce.verifier,
        };
        let state = self.remember(pending);
        let mut url = endpoints.authorization.clone();
        let scope =
            if self.config.allowed_domains.is_empty() && self.config.principal_claim == "sub" {
                "openid"
            } else {
                "openid email"
            };
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", callback)
            .append_pair("scope", scope)
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(url.into())
    }

    /// The provider sent the browser back: the signed-in principal, its groups and the
    /// original `/authorize` query, or what went wrong (for the page).
    pub async fn finish(&self, params: &Params, callback: &str) -> Result<SignedIn, String> {
        let state = params
            .single("state")?
            .ok_or("the provider sent no state back")?;
        let pending = self
            .recall(state)
            .ok_or("this sign-in is unknown or took longer than ten minutes; start again from your application")?;
        if let Some(error) = params.single("error")? {
            let description = params.single("error_description")?.unwrap_or("");
            return Err(format!(
                "the identity provider refused the sign-in: {error} {description}"
            ));
        }
        if let Some(iss) = params.single("iss")?
            && iss != self.config.issuer.as_str()
            && iss != self.config.issuer.as_str().trim_end_matches('/')
        {
            return Err("the answer names another identity provider (iss)".into());
        }
        let code = params
            .single("code")?
            .ok_or("the provider sent no code back")?;
        let endpoints = self.provider.endpoints().await?;
        let exchanged = self
            .provider
            .exchange(
                &endpoints,
                code,
                callback,
                pending.verifier.expose(),
                &self.config.client_id,
                &self.config.client_secret,
            )
            .await?;
        let mut claims = self
            .verifier
            .verify(&exchanged.id_token, &pending.nonce)
            .await?;
        let by_email = !self.config.allowed_domains.is_empty()
            || claims::principal_kind(&self.config.principal_claim) == claims::PrincipalKind::Email;
        let needs_email =
            by_email && !(claims.contains_key("email") && claims.contains_key("email_verified"));
        // A provider may keep groups for UserInfo too (oidc-provider does by default).
        let needs_groups =
            (self.config.groups_claim.as_ref()).is_some_and(|c| !claims.contains_key(c));
        if (needs_email || needs_groups || !claims.contains_key(&self.config.principal_claim))
            && let Some(access) = &exchanged.access_token
        {
            // Claims a provider keeps for UserInfo; its `sub` must be the id_token's
            // (OpenID Connect Core §5.3.4), and what the id_token says is never overridden.
            let extra = self.provider.userinfo(&endpoints, access).await?;
            if extra.get("sub") != claims.get("sub") {
                return Err(
                    "the identity provider's UserInfo names another user than its id_token".into(),
                );
            }
            // UserInfo's email_verified speaks of UserInfo's email: it counts only for the
            // same address as the id_token's (or when the id_token named none).
            let same_email =
                !claims.contains_key("email") || extra.get("email") == claims.get("email");
            for (name, value) in extra {
                if name == "email_verified" && !same_email {
                    continue;
                }
                claims.entry(name).or_insert(value);
            }
        }
        let principal = claims
            .get(&self.config.principal_claim)
            .and_then(serde_json::Value::as_str)
            .filter(|p| !p.is_empty() && p.len() <= 256 && !p.chars().any(char::is_control))
            .ok_or_else(|| {
                format!(
                    "the identity provider's answer has no usable '{}' claim (--principal-claim)",
                    self.config.principal_claim
                )
            })?
            .to_owned();
        if claims::principal_kind(&self.config.principal_claim) == claims::PrincipalKind::Email
            && !claims::email_verified(&claims)
        {
            tracing::info!(
                outcome = "unverified_email",
                "sign-in refused: the provider has not verified the email that would name the user"
            );
            return Err(format!(
                "the identity provider has not verified the email {principal} (email_verified is not true), so it cannot name you here; verify it at the provider, or ask this server's operator to name users by their subject (--principal-claim sub)"
            ));
        }
        self.allowed(&principal, &claims)?;
        let groups = self.groups(&claims)?;
        Ok(SignedIn {
            user: principal,
            groups,
            query: pending.query,
        })
    }

    /// The user's groups from `--login-groups-claim` (a list of strings, or one
    /// space-separated string; absent: none). A claim of another shape, or too many groups,
    /// refuses the sign-in rather than keep some of them.
    fn groups(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<String>, String> {
        let Some(name) = &self.config.groups_claim else {
            return Ok(Vec::new());
        };
        let source = format!("the identity provider's '{name}' claim (--login-groups-claim)");
        let max = self.config.max_groups;
        match claims.get(name) {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(serde_json::Value::String(text)) => crate::authserver::users::checked_groups(
                text.split_ascii_whitespace(),
                max,
                &source,
            ),
            Some(serde_json::Value::Array(items))
                if items.iter().all(serde_json::Value::is_string) =>
            {
                crate::authserver::users::checked_groups(
                    items.iter().filter_map(serde_json::Value::as_str),
                    max,
                    &source,
                )
            }
            Some(_) => Err(format!(
                "{source} is neither a list of names nor a string; name a claim that lists the groups"
            )),
        }
    }

    fn allowed(
        &self,
        principal: &str,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), String> {
        let config = &self.config;
        if config.allowed_users.is_empty() && config.allowed_domains.is_empty() {
            return Ok(());
        }
        if config.allowed_users.iter().any(|u| u == principal) {
            return Ok(());
        }
        let email = claims.get("email").and_then(serde_json::Value::as_str);
        let verified = claims::email_verified(claims);
        if let Some(domain) = email
            .and_then(|e| e.rsplit_once('@'))
            .map(|(_, d)| d.to_ascii_lowercase())
            && verified
            && config
                .allowed_domains
                .iter()
                .any(|d| d.eq_ignore_ascii_case(&domain))
        {
            return Ok(());
        }
        if email.is_some() && !verified && !config.allowed_domains.is_empty() {
            tracing::info!(
                principal,
                outcome = "unverified_email",
                "sign-in refused: --allow-domain needs a verified email"
            );
            return Err(format!(
                "{principal} may not use this server: its email is not verified at the identity provider (email_verified is not true), and --allow-domain admits only verified emails; ask its operator"
            ));
        }
        tracing::info!(principal, outcome = "not_allowed", "sign-in refused");
        Err(format!(
            "{principal} may not use this server (it is limited by --allow-user / --allow-domain); ask its operator"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_key::ClusterKey;

    fn login(key: Option<&str>) -> OidcLogin {
        let config = LoginConfig {
            issuer: Url::parse("https://login.example.com").unwrap(),
            client_id: "serve".into(),
            client_secret: Secret::new("s"),
            principal_claim: "sub".into(),
            principal_claim_verified: false,
            allowed_users: Vec::new(),
            allowed_domains: Vec::new(),
            groups_claim: None,
            max_groups: 64,
            http: crate::http::client::ClientOptions {
                connect_timeout: Duration::from_secs(1),
                read_timeout: None,
                extra_roots: Vec::new(),
            },
        };
        let sealer = key.map(|k| ClusterKey::parse(k).unwrap().sealer("login-state"));
        OidcLogin::new(config, sealer)
    }

    fn pending() -> Pending {
        Pending {
            query: "client_id=c&state=s".into(),
            nonce: "n".into(),
            verifier: Secret::new("the-pkce-verifier"),
        }
    }

    const KEY: &str = "a-cluster-key-of-more-than-thirty-two-bytes-AAAA";

    #[test]
    fn among_replicas_a_pending_sign_in_travels_sealed_in_its_state() {
        let (here, there) = (login(Some(KEY)), login(Some(KEY)));
        let state = here.remember(pending());
        assert!(
            !state.contains("the-pkce-verifier") && !state.contains("client_id"),
            "the state is opaque"
        );
        let back = there.recall(&state).expect("another replica finds it");
        assert_eq!(back.query, "client_id=c&state=s");
        assert_eq!(back.verifier.expose(), "the-pkce-verifier");
        let stranger = login(Some("another-cluster-key-longer-than-thirty-two-bytes-B"));
        assert!(stranger.recall(&state).is_none(), "another cluster's key");
        assert!(there.recall(&format!("{state}A")).is_none(), "tampered");
        let sealer = ClusterKey::parse(KEY).unwrap().sealer("login-state");
        let expired = sealer.seal(br#"{"query":"q","nonce":"n","verifier":"v","until":1000}"#);
        assert!(there.recall(&expired).is_none(), "over");
    }

    #[test]
    fn a_single_server_seals_with_a_key_of_its_own_and_keeps_nothing() {
        let alone = login(None);
        let states: Vec<String> = (0..2000).map(|_| alone.remember(pending())).collect();
        assert!(
            login(None).recall(&states[0]).is_none(),
            "only the process that started it"
        );
        // However many were started, the first still comes back: nothing was evicted.
        assert!(alone.recall(&states[0]).is_some());
        assert!(alone.recall(&states[1999]).is_some());
        assert!(
            !states[0].contains("the-pkce-verifier"),
            "the state is opaque"
        );
    }
}
