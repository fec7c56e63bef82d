//! A config file's remote server (`"type": "http"` or `"sse"` with a `url` and `headers`, as
//! Claude Code writes them) is served through the relay: its command is this binary in
//! relay mode, `mcp-stdio URL`, which brings the relay's whole link engine (Streamable HTTP
//! or HTTP+SSE, the era probe and translation, a lost session re-initialized, a login stored
//! by `mcp-stdio login` used and refreshed, proxies and `SSL_CERT_FILE`) to a stdio child
//! that serve drives like any other. Header values may hold secrets, so they never go on
//! the command line (which `ps` shows): each is put in the child's environment and the
//! relay's `-H` names the variable.

use std::collections::BTreeMap;

use super::child::ChildCommand;
use crate::env_expand::expand;

/// The environment variable that carries the `n`th header's value to the relay.
fn header_variable(n: usize) -> String {
    format!("MCP_STDIO_REMOTE_HEADER_{n}")
}

/// The relay's command for the remote server `name` at `url`.
pub fn command(
    name: &str,
    kind: &str,
    url: Option<&str>,
    headers: &BTreeMap<String, String>,
    extra_env: Vec<(String, String)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ChildCommand, String> {
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
    tracing::debug!(server = %name, transport, "a remote server, served through the relay");
    child_env.extend(extra_env);
    Ok(ChildCommand {
        argv,
        env: child_env,
        cwd: None,
        server: Some(name.to_owned()),
        // serve's own bearer is not the remote server's.
        env_remove: vec!["MCP_BEARER_TOKEN".into()],
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
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "API_TOKEN").then(|| "s3cret-token".to_owned())
    }

    #[test]
    fn a_remote_entry_becomes_the_relay_with_its_headers_out_of_the_command_line() {
        let headers =
            BTreeMap::from([("Authorization".to_owned(), "Bearer ${API_TOKEN}".to_owned())]);
        let command = command(
            "saas",
            "http",
            Some("https://mcp.example.com/mcp"),
            &headers,
            Vec::new(),
            &env,
        )
        .unwrap();
        assert_eq!(
            command.argv[1..4],
            [
                "https://mcp.example.com/mcp",
                "--transport",
                "streamable-http"
            ]
        );
        assert_eq!(
            command.argv[4..],
            ["-H", "Authorization: ${MCP_STDIO_REMOTE_HEADER_0}"]
        );
        assert!(
            !command.argv.iter().any(|a| a.contains("s3cret")),
            "{:?}",
            command.argv
        );
        assert_eq!(
            command.env,
            [(
                "MCP_STDIO_REMOTE_HEADER_0".to_owned(),
                "Bearer s3cret-token".to_owned()
            )]
        );
        let sse = super::command(
            "old",
            "sse",
            Some("http://127.0.0.1:9/sse"),
            &BTreeMap::new(),
            Vec::new(),
            &env,
        )
        .unwrap();
        assert_eq!(sse.argv[3], "sse");
    }

    #[test]
    fn bad_remote_entries_say_what_works() {
        let none = BTreeMap::new();
        let cases = [
            ("ws", Some("wss://x/mcp"), "use \"stdio\""),
            ("http", None, "needs a `url`"),
            ("http", Some("ftp://x/mcp"), "http:// or https://"),
            ("http", Some("${NOPE}/mcp"), "NOPE"),
        ];
        for (kind, url, needle) in cases {
            let error = command("r", kind, url, &none, Vec::new(), &env).unwrap_err();
            assert!(error.contains(needle), "{kind} {url:?}: {error}");
        }
        let bad = BTreeMap::from([("Bad Header".to_owned(), "x".to_owned())]);
        assert!(
            command("r", "http", Some("https://x/mcp"), &bad, Vec::new(), &env)
                .unwrap_err()
                .contains("not a header name")
        );
        let broken = BTreeMap::from([("X-Key".to_owned(), "a\nb".to_owned())]);
        let error = command(
            "r",
            "http",
            Some("https://x/mcp"),
            &broken,
            Vec::new(),
            &env,
        )
        .unwrap_err();
        assert!(
            error.contains("not a header value") && !error.contains("a\nb"),
            "{error}"
        );
        let secret_url = command(
            "r",
            "http",
            Some("https://me:pw@x/mcp"),
            &none,
            Vec::new(),
            &env,
        )
        .unwrap_err();
        assert!(
            secret_url.contains("give them as a header") && !secret_url.contains("pw@"),
            "{secret_url}"
        );
        let shown_line = shown(&["relay".into(), "https://x/mcp?key=k3y".into()]);
        assert_eq!(shown_line, "relay https://x/mcp?…");
    }
}
