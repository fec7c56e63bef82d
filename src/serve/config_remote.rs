//! A config file's remote server (`"type": "http"` or `"sse"` with a `url` and `headers`, as
//! Claude Code writes them) is served through the relay: its command is this binary in
//! relay mode, `mcp-stdio URL`, which brings the relay's whole link engine (Streamable HTTP
//! or HTTP+SSE, the era probe and translation, a lost session re-initialized, a login stored
//! by `mcp-stdio login` used and refreshed, proxies and `SSL_CERT_FILE`) to a stdio child
//! that serve drives like any other. Header values may hold secrets, so they never go on
//! the command line (which `ps` shows): each is put in the child's environment and the
//! relay's `-H` names the variable.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::child::ChildCommand;
use crate::env_expand::expand;

/// A remote server entry's own keys.
#[derive(Debug, Default, Deserialize)]
pub struct RemoteKeys {
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// How the relay logs in where the server asks for OAuth.
    oauth: Option<RemoteOAuth>,
    /// Extra trusted root certificates (PEM) for the server and its authorization server.
    ca_cert: Option<String>,
}

impl RemoteKeys {
    /// Whether any of them is written (a stdio server may have none).
    pub fn is_given(&self) -> bool {
        self.url.is_some()
            || !self.headers.is_empty()
            || self.oauth.is_some()
            || self.ca_cert.is_some()
    }
}

/// `oauth = { … }`: the relay's OAuth client settings for this server. Without it a login
/// stored by `mcp-stdio login URL` is used (and refreshed); a browser login never starts
/// under serve. Claude Code's `clientId` and `callbackPort` spellings are accepted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteOAuth {
    #[serde(alias = "clientId")]
    client_id: Option<String>,
    /// `${VAR}` expanded; reaches the relay in its environment, never its command line.
    #[serde(alias = "clientSecret")]
    client_secret: Option<String>,
    /// A P-256 key (PKCS#8 PEM) for `private_key_jwt`; relative to the file's folder.
    #[serde(alias = "clientKey")]
    client_key: Option<String>,
    /// Log in as the client itself (no user): the client credentials grant.
    #[serde(alias = "clientCredentials", default)]
    client_credentials: bool,
    scope: Option<String>,
    resource: Option<String>,
    /// `auto`, `keyring` or `file`: where the stored login is looked for.
    #[serde(alias = "tokenStore")]
    token_store: Option<String>,
    /// Claude Code's browser-login port: no browser login happens under serve.
    #[serde(alias = "callbackPort")]
    #[allow(dead_code)]
    callback_port: Option<u16>,
    /// `always`, `auto` or `never`: DPoP-bound tokens (the relay's `--dpop`).
    dpop: Option<String>,
    /// The workload's JWT (a projected service-account token): workload identity, the
    /// relay's `--workload-token-file`; relative to the file's folder.
    #[serde(alias = "workloadTokenFile")]
    workload_token_file: Option<String>,
    /// Enterprise-managed authorization: the organisation's identity provider, our client
    /// there, and an ID token file (serve opens no browser, so one is needed unless a
    /// `mcp-stdio login` left an IdP login in the store).
    #[serde(alias = "idpIssuer")]
    idp_issuer: Option<String>,
    #[serde(alias = "idpClientId")]
    idp_client_id: Option<String>,
    #[serde(alias = "idpIdTokenFile")]
    idp_id_token_file: Option<String>,
}

/// The relay's flags (and environment) for `oauth` and `ca_cert`.
fn login_flags(
    keys: &RemoteKeys,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    argv: &mut Vec<String>,
    child_env: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let file = |raw: &str, key: &str| -> Result<String, String> {
        let path = base.join(expand(raw, env).map_err(|e| format!("{key}: {e}"))?);
        if !path.is_file() {
            return Err(format!(
                "{key}: {} is not a file (a relative path is from the config file's folder)",
                path.display()
            ));
        }
        Ok(path.to_string_lossy().into_owned())
    };
    if let Some(ca) = &keys.ca_cert {
        argv.extend(["--ca-cert".into(), file(ca, "ca_cert")?]);
    }
    let Some(oauth) = &keys.oauth else {
        return Ok(());
    };
    enterprise_flags(oauth, &file, env, argv)?;
    let needs_client =
        oauth.client_secret.is_some() || oauth.client_key.is_some() || oauth.client_credentials;
    let Some(client_id) = &oauth.client_id else {
        if needs_client {
            return Err("oauth: client_secret, client_key and client_credentials belong to a client: add client_id".into());
        }
        return Ok(());
    };
    let client_id = expand(client_id, env).map_err(|e| format!("oauth.client_id: {e}"))?;
    argv.extend(["--client-id".into(), client_id]);
    if oauth.client_credentials {
        if oauth.client_secret.is_none() && oauth.client_key.is_none() {
            return Err("oauth.client_credentials needs client_secret (e.g. \"${SAAS_CLIENT_SECRET}\") or client_key (a PEM file)".into());
        }
        argv.push("--client-credentials".into());
    }
    if let Some(secret) = &oauth.client_secret {
        let secret = expand(secret, env).map_err(|e| format!("oauth.client_secret: {e}"))?;
        child_env.push(("MCP_OAUTH_CLIENT_SECRET".into(), secret));
    }
    if let Some(key) = &oauth.client_key {
        argv.extend(["--client-key".into(), file(key, "oauth.client_key")?]);
    }
    for (flag, value) in [
        ("--oauth-scope", &oauth.scope),
        ("--oauth-resource", &oauth.resource),
    ] {
        if let Some(value) = value {
            argv.extend([flag.into(), expand(value, env)?]);
        }
    }
    match oauth.token_store.as_deref() {
        None => {}
        Some(store @ ("auto" | "keyring" | "file")) => {
            argv.extend(["--token-store".into(), store.into()]);
        }
        Some(other) => {
            return Err(format!(
                "oauth.token_store {other:?}: use auto, keyring or file"
            ));
        }
    }
    Ok(())
}

/// The relay's flags for DPoP, workload identity and an identity provider.
fn enterprise_flags(
    oauth: &RemoteOAuth,
    file: &dyn Fn(&str, &str) -> Result<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
    argv: &mut Vec<String>,
) -> Result<(), String> {
    match oauth.dpop.as_deref() {
        None => {}
        Some(when @ ("always" | "auto" | "never")) => argv.extend(["--dpop".into(), when.into()]),
        Some(other) => return Err(format!("oauth.dpop {other:?}: use always, auto or never")),
    }
    if let Some(token) = &oauth.workload_token_file {
        if oauth.client_secret.is_some() || oauth.client_key.is_some() || oauth.client_credentials {
            return Err("oauth.workload_token_file is a login of its own: drop client_secret, client_key and client_credentials".into());
        }
        argv.extend([
            "--workload-token-file".into(),
            file(token, "oauth.workload_token_file")?,
        ]);
    }
    let Some(issuer) = &oauth.idp_issuer else {
        if oauth.idp_client_id.is_some() || oauth.idp_id_token_file.is_some() {
            return Err("oauth: idp_client_id and idp_id_token_file belong to an identity provider: add idp_issuer".into());
        }
        return Ok(());
    };
    let client = oauth.idp_client_id.as_ref().ok_or(
        "oauth.idp_issuer needs idp_client_id (and client_id with client_secret for the MCP server's authorization server)",
    )?;
    argv.extend([
        "--idp-issuer".into(),
        expand(issuer, env).map_err(|e| format!("oauth.idp_issuer: {e}"))?,
        "--idp-client-id".into(),
        expand(client, env).map_err(|e| format!("oauth.idp_client_id: {e}"))?,
    ]);
    if let Some(token) = &oauth.idp_id_token_file {
        argv.extend([
            "--idp-id-token-file".into(),
            file(token, "oauth.idp_id_token_file")?,
        ]);
    }
    Ok(())
}

/// The environment variable that carries the `n`th header's value to the relay.
fn header_variable(n: usize) -> String {
    format!("MCP_STDIO_REMOTE_HEADER_{n}")
}

/// The relay's command for the remote server `name` at `url`.
pub fn command(
    name: &str,
    kind: &str,
    keys: &RemoteKeys,
    extra_env: Vec<(String, String)>,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ChildCommand, String> {
    let (url, headers) = (keys.url.as_deref(), &keys.headers);
    let transport = match kind {
        "http" | "streamable-http" | "streamableHttp" => "streamable-http",
        "sse" => "sse",
        other => {
            return Err(format!(
                "type {other:?}: use \"stdio\" (a command), \"http\" (Streamable HTTP) or \"sse\" (HTTP+SSE), each with a `url`"
            ));
        }
    };
    let url = url.ok_or(format!(
        "type {kind:?} needs a `url`: the remote server's endpoint, e.g. \"https://mcp.example.com/mcp\""
    ))?;
    let url = expand(url, env)?;
    // The URL is on the relay's command line and in the log: not the place for secrets,
    // and the message does not repeat it.
    let parsed = url::Url::parse(&url).map_err(|e| format!("url: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("url: use an http:// or https:// URL".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("url: credentials in the URL would show in the process list and the log; give them as a header, e.g. \"headers\": {\"Authorization\": \"Bearer ${TOKEN}\"}".into());
    }
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to relay to {url}: {e}"))?
        .to_string_lossy()
        .into_owned();
    let mut argv = vec![program, url, "--transport".into(), transport.into()];
    let mut child_env = Vec::new();
    for (n, (header, value)) in headers.iter().enumerate() {
        if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(format!(
                "headers: {header:?} is not a header name (letters, digits and '-')"
            ));
        }
        let value = expand(value, env).map_err(|e| format!("headers.{header}: {e}"))?;
        if http::HeaderValue::from_str(&value).is_err() {
            return Err(format!(
                "headers.{header}: its value (after ${{VAR}} expansion) is not a header value: use visible ASCII and spaces, no line breaks"
            ));
        }
        let variable = header_variable(n);
        argv.push("-H".into());
        argv.push(format!("{header}: ${{{variable}}}"));
        child_env.push((variable, value));
    }
    login_flags(keys, base, env, &mut argv, &mut child_env)?;
    tracing::debug!(server = %name, transport, "a remote server, served through the relay");
    child_env.extend(extra_env);
    // serve's own bearer and OAuth client are not the remote server's (removal comes
    // after the entry's environment, so what the entry sets stays).
    let env_remove = [
        "MCP_BEARER_TOKEN",
        "MCP_OAUTH_CLIENT_ID",
        "MCP_OAUTH_CLIENT_SECRET",
    ]
    .into_iter()
    .filter(|name| !child_env.iter().any(|(k, _)| k == name))
    .map(str::to_owned)
    .collect();
    Ok(ChildCommand {
        argv,
        env: child_env,
        cwd: None,
        server: Some(name.to_owned()),
        env_remove,
    })
}

/// A command line as the log shows it: a URL's query left out (it may hold a key).
pub fn shown(argv: &[String]) -> String {
    argv.iter()
        .map(|arg| match arg.split_once('?') {
            Some((before, _)) if arg.contains("://") => format!("{before}?…"),
            _ => arg.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `type`s a server entry may have.
pub const TYPES: [&str; 5] = ["stdio", "http", "sse", "streamable-http", "streamableHttp"];

#[cfg(test)]
mod tests;
