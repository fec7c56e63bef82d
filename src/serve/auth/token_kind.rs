//! Whether a signed JWT is an access token at all. An OpenID provider's
//! id_token is signed with the same keys, names the same issuer, and, when the resource's
//! audience is also an OpenID client id (common with Entra app registrations), names it
//! as `aud`: without this check any user's id_token would pass as an access token. RFC
//! 9068's `typ: at+jwt` settles it where the provider sets it; otherwise the signs that
//! work with the providers people use (each is in `docs/serve.md`):
//! - `at_hash`, `c_hash`, `s_hash` exist only in id_tokens (OpenID Connect Core §3);
//! - Keycloak says which it is in a `typ` claim (`Bearer` or `ID`), and Amazon Cognito in
//!   `token_use` (`access` or `id`);
//! - `nonce` belongs to id_tokens (Keycloak before 24 also copied it into access tokens,
//!   which its `typ: Bearer` vouches for);
//! - an id_token's `azp` is the client it was issued to, which is also its only `aud`; an
//!   access token's `azp` is the client, its `aud` the resource (unless a client calls
//!   itself, so a token that carries an access token's own claims — `scope`, `scp`,
//!   `roles`, `client_id`, `cid` — is not judged by this shape);
//! - Microsoft Entra access tokens always name their client (`azp` in v2, `appid` in v1),
//!   its id_tokens never do (and for Entra this replaces the shape rule: an app
//!   registration that is its own API gets tokens whose `azp` is their `aud`).
//!
//! A provider whose access tokens carry id_token claims anyway (Authentik copies the
//! sign-in's `nonce`, and makes `aud` and `azp` the client) needs `--oauth-no-id-token-check`:
//! only the explicit markers count then.

use super::claims::{Audience, Claims};

/// Whether `issuer` is Microsoft Entra's (any cloud, workforce or external tenants).
fn is_entra(issuer: &str) -> bool {
    let Ok(url) = url::Url::parse(issuer) else {
        return false;
    };
    let host = url.host_str().unwrap_or("");
    matches!(
        host,
        "login.microsoftonline.com"
            | "sts.windows.net"
            | "login.microsoftonline.us"
            | "login.partner.microsoftonline.cn"
            | "login.chinacloudapi.cn"
    ) || host.ends_with(".ciamlogin.com")
}

/// How tokens are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KindCheck {
    /// RFC 9068's `typ`, else the claims (the default).
    #[default]
    Claims,
    /// `--oauth-require-at-jwt`: RFC 9068's `typ` only.
    AtJwt,
    /// `--oauth-no-id-token-check`: only explicit markers (`typ`, Keycloak's `typ`
    /// claim, Cognito's `token_use`).
    MarkersOnly,
}

/// Why the token with these `claims` is not an access token, if it is not. `header_typ`
/// is the JOSE header's `typ`.
pub fn not_an_access_token(
    header_typ: Option<&str>,
    claims: &Claims,
    issuer: &str,
    check: KindCheck,
) -> Option<&'static str> {
    let signs = &claims.signs;
    let azp = claims.azp.as_deref();
    let at_jwt = header_typ.is_some_and(|typ| {
        typ.eq_ignore_ascii_case("at+jwt") || typ.eq_ignore_ascii_case("application/at+jwt")
    });
    if at_jwt {
        return None;
    }
    if check == KindCheck::AtJwt {
        return Some("its header's typ is not at+jwt (--oauth-require-at-jwt)");
    }
    let text = |claim: &Option<serde_json::Value>| {
        claim
            .as_ref()
            .and_then(serde_json::Value::as_str)
            .map(str::to_ascii_lowercase)
    };
    // Keycloak's `typ` and Cognito's `token_use` say what the token is; other values of
    // claims with these names say nothing here.
    match text(&signs.typ).as_deref() {
        Some("bearer") => return None,
        Some("id" | "refresh" | "logout") => {
            return Some("its typ claim says it is not an access token");
        }
        _ => {}
    }
    match text(&signs.token_use).as_deref() {
        Some("access") => return None,
        Some("id") => return Some("its token_use is id"),
        _ => {}
    }
    if check == KindCheck::MarkersOnly {
        return None;
    }
    if signs.at_hash.is_some() || signs.c_hash.is_some() || signs.s_hash.is_some() {
        return Some("it carries at_hash, c_hash or s_hash, which only id_tokens carry");
    }
    if signs.nonce.is_some() {
        return Some("it carries a nonce, which belongs to id_tokens");
    }
    if is_entra(issuer) {
        return (azp.is_none() && signs.appid.is_none())
            .then_some("it names no client (azp or appid), as every Entra access token does");
    }
    let access_claims = claims.scope.is_some()
        || claims.scp.is_some()
        || claims.client_id.is_some()
        || signs.roles.is_some()
        || signs.cid.is_some();
    if !access_claims
        && let (Some(azp), Some(aud)) = (azp, signs.aud.as_ref().and_then(Audience::only))
        && azp == aud
    {
        return Some("its azp is its only audience, the shape of an id_token");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claims as the verifier reads them (with the `sub` and `exp` it requires).
    fn read(mut claims: serde_json::Value) -> Claims {
        claims["sub"] = "s".into();
        claims["exp"] = 1.into();
        serde_json::from_value(claims).unwrap()
    }

    fn check(
        header_typ: Option<&str>,
        claims: serde_json::Value,
        issuer: &str,
    ) -> Option<&'static str> {
        not_an_access_token(header_typ, &read(claims), issuer, KindCheck::Claims)
    }

    const GENERIC: &str = "https://login.example.com";
    const ENTRA: &str = "https://login.microsoftonline.com/0c2d-tenant/v2.0";

    #[test]
    fn id_tokens_of_the_providers_people_use_are_refused() {
        let refused = [
            // Any provider: id-token-only hashes; a nonce.
            (GENERIC, serde_json::json!({"aud": "api", "at_hash": "x"})),
            (GENERIC, serde_json::json!({"aud": "api", "c_hash": "x"})),
            (GENERIC, serde_json::json!({"aud": "api", "nonce": "n"})),
            // Google, Keycloak without typ, Auth0: azp = the only aud.
            (
                GENERIC,
                serde_json::json!({"aud": "client-1", "azp": "client-1"}),
            ),
            (
                GENERIC,
                serde_json::json!({"aud": ["client-1"], "azp": "client-1"}),
            ),
            // Keycloak.
            (
                GENERIC,
                serde_json::json!({"aud": "api", "typ": "ID", "azp": "web"}),
            ),
            // Cognito.
            (
                GENERIC,
                serde_json::json!({"aud": "client-1", "token_use": "id"}),
            ),
            // Entra v2 and v1 id_tokens: no azp, no appid.
            (
                ENTRA,
                serde_json::json!({"aud": "11111111-app", "oid": "o", "ver": "2.0"}),
            ),
            (
                "https://sts.windows.net/tenant/",
                serde_json::json!({"aud": "11111111-app", "ver": "1.0", "roles": ["Admin"]}),
            ),
        ];
        for (issuer, claims) in refused {
            assert!(
                check(Some("JWT"), claims.clone(), issuer).is_some(),
                "{claims}"
            );
        }
    }

    #[test]
    fn access_tokens_of_the_providers_people_use_pass() {
        let accepted = [
            // RFC 9068 (Auth0's RFC 9068 profile, Duende, node oidc-provider, Curity, Ping).
            (
                Some("at+jwt"),
                GENERIC,
                serde_json::json!({"aud": "api", "azp": "api"}),
            ),
            (
                Some("application/at+jwt"),
                GENERIC,
                serde_json::json!({"aud": "api"}),
            ),
            // Auth0's own profile: azp the client, aud the API and userinfo.
            (
                Some("JWT"),
                GENERIC,
                serde_json::json!({"aud": ["https://api", "https://t.auth0.com/userinfo"], "azp": "client-1", "scope": "openid"}),
            ),
            // Okta: cid, scp, no azp.
            (
                Some("JWT"),
                GENERIC,
                serde_json::json!({"aud": "api://default", "cid": "client-1", "scp": ["mcp"]}),
            ),
            // Keycloak, before 24 with the sign-in's nonce.
            (
                Some("JWT"),
                GENERIC,
                serde_json::json!({"aud": "account", "typ": "Bearer", "azp": "web", "nonce": "n"}),
            ),
            // Keycloak with an audience mapper naming its own client.
            (
                Some("JWT"),
                GENERIC,
                serde_json::json!({"aud": "web", "typ": "Bearer", "azp": "web"}),
            ),
            // Cognito (its access tokens name no aud; an --oauth-audience check refuses them
            // elsewhere, this one does not).
            (
                None,
                GENERIC,
                serde_json::json!({"client_id": "c", "token_use": "access"}),
            ),
            // Entra v2 and v1 access tokens.
            (
                Some("JWT"),
                ENTRA,
                serde_json::json!({"aud": "11111111-app", "azp": "22222222-client", "azpacr": "0", "scp": "Mcp.Use"}),
            ),
            (
                Some("JWT"),
                "https://sts.windows.net/tenant/",
                serde_json::json!({"aud": "api://mcp", "appid": "22222222-client", "appidacr": "1", "roles": ["Admin"]}),
            ),
            // Google's service identity token: an id_token meant for this audience.
            (
                Some("JWT"),
                GENERIC,
                serde_json::json!({"aud": "https://mcp.example.com", "azp": "1234567890"}),
            ),
        ];
        for (typ, issuer, claims) in accepted {
            assert_eq!(check(typ, claims.clone(), issuer), None, "{claims}");
        }
    }

    #[test]
    fn a_client_that_is_its_own_api_and_markers_only_mode() {
        // Entra v2: one app registration as client and API: azp is aud.
        let entra_self = serde_json::json!({"aud": "1111-app", "azp": "1111-app", "azpacr": "1", "scp": "Mcp.Use"});
        assert_eq!(check(Some("JWT"), entra_self, ENTRA), None);
        // Elsewhere a token with an access token's claims is not judged by the shape.
        let scoped = serde_json::json!({"aud": "web", "azp": "web", "scope": "openid mcp"});
        assert_eq!(check(Some("JWT"), scoped, GENERIC), None);
        // Authentik: its access tokens carry the nonce, and aud = azp = the client.
        let authentik = read(serde_json::json!({"aud": "c", "azp": "c", "nonce": "n"}));
        let markers_only =
            |claims: &Claims| not_an_access_token(None, claims, GENERIC, KindCheck::MarkersOnly);
        assert!(not_an_access_token(None, &authentik, GENERIC, KindCheck::Claims).is_some());
        assert_eq!(markers_only(&authentik), None);
        // The explicit markers still count.
        assert!(markers_only(&read(serde_json::json!({"typ": "ID"}))).is_some());
        // A typ claim that is not text is no marker and no error.
        let odd = serde_json::json!({"typ": 7, "token_use": ["x"]});
        assert_eq!(check(None, odd, GENERIC), None);
    }

    #[test]
    fn unknown_values_of_typ_and_token_use_say_nothing() {
        let nonce = serde_json::json!({"aud": "api", "typ": "at+jwt", "nonce": "n"});
        assert!(
            check(None, nonce, GENERIC).is_some(),
            "the nonce still counts"
        );
        let plain = serde_json::json!({"aud": "api", "typ": "access_token", "token_use": "x"});
        assert_eq!(check(None, plain, GENERIC), None);
        let refresh = serde_json::json!({"aud": "api", "typ": "Refresh"});
        assert!(check(None, refresh, GENERIC).is_some());
    }

    #[test]
    fn require_at_jwt_accepts_only_rfc_9068_tokens() {
        let claims = read(serde_json::json!({"aud": "api"}));
        let strict = |typ| not_an_access_token(typ, &claims, GENERIC, KindCheck::AtJwt);
        assert!(strict(Some("JWT")).is_some());
        assert!(strict(None).is_some());
        assert_eq!(strict(Some("at+JWT")), None);
    }
}
