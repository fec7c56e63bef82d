//! How the PostgreSQL store's connection is protected: verified TLS to any host that is not
//! this machine, unless the operator accepts less in so many words. libpq's own default,
//! `prefer`, lets anyone on the path answer "no TLS here" and read the grants go by.

use std::net::IpAddr;

/// What the connection insists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// TLS, the server's certificate verified (chain and host name) against the system's
    /// roots and `sslrootcert`.
    Required,
    /// TLS if the server offers it, else plain (`prefer`, `allow`).
    Preferred,
    /// Plain (`disable`).
    Disabled,
}

/// What a `postgres://` URL's connection must insist on. A host other than this machine
/// gets verified TLS unless `sslmode` says otherwise, and a weaker `sslmode` for such a host
/// is refused unless `allow_plaintext` (`--oauth-store-allow-plaintext`). The URL's text
/// itself (`verify-full`, `sslrootcert`) is [`crate::postgres_dsn`]'s to read.
pub fn protection(raw: &str, allow_plaintext: bool) -> Result<Protection, String> {
    let url = url::Url::parse(raw).map_err(|e| {
        format!(
            "--oauth-store: not a PostgreSQL URL ({e}); e.g. postgres://mcp@db.internal/mcp_stdio"
        )
    })?;
    let mut mode = None;
    let mut query_hosts = Vec::new();
    for (key, value) in url.query_pairs() {
        match key.as_ref() {
            "sslmode" => mode = Some(value.into_owned()),
            "host" => query_hosts.extend(value.split(',').map(str::to_owned)),
            _ => {}
        }
    }
    let remote = match url.host_str().filter(|h| !h.is_empty()) {
        Some(host) => host.split(',').any(|h| !is_this_machine(h)),
        None => query_hosts
            .iter()
            .any(|h| !(h.starts_with('/') || is_this_machine(h))),
    };
    match mode.as_deref() {
        None if remote => Ok(Protection::Required),
        None => Ok(Protection::Preferred),
        Some("require" | "verify-ca" | "verify-full") => Ok(Protection::Required),
        Some(weak @ ("prefer" | "allow" | "disable")) => {
            if remote && !allow_plaintext {
                return Err(format!(
                    "--oauth-store sslmode={weak} to a host other than this machine lets anyone on the path turn TLS off and read the grants and tokens as they pass: use sslmode=require (or verify-full, the default there: the certificate is verified against the system's roots and any sslrootcert), or add --oauth-store-allow-plaintext if the network to the database is trusted"
                ));
            }
            Ok(if weak == "disable" {
                Protection::Disabled
            } else {
                Protection::Preferred
            })
        }
        Some(other) => Err(format!(
            "--oauth-store sslmode={other} is not a PostgreSQL TLS mode: use require or verify-full (verified TLS), or prefer, allow, disable"
        )),
    }
}

/// `localhost`, or a loopback address.
fn is_this_machine(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_host_gets_verified_tls_by_default() {
        assert_eq!(
            protection("postgres://mcp:pw@db.internal:5432/mcp", false),
            Ok(Protection::Required)
        );
        for mode in ["require", "verify-ca", "verify-full"] {
            let url = format!("postgres://mcp@10.0.0.5/mcp?sslmode={mode}&application_name=x");
            assert_eq!(protection(&url, false), Ok(Protection::Required), "{mode}");
        }
    }

    #[test]
    fn a_downgradeable_mode_to_another_host_is_refused_unless_accepted() {
        for mode in ["prefer", "allow", "disable"] {
            let url = format!("postgres://mcp@db.internal/mcp?sslmode={mode}");
            let refused = protection(&url, false).unwrap_err();
            assert!(
                refused.contains("--oauth-store-allow-plaintext"),
                "{refused}"
            );
            assert!(refused.contains(mode), "{refused}");
            assert!(protection(&url, true).is_ok(), "{mode}");
        }
        assert_eq!(
            protection("postgres://mcp@db.internal/mcp?sslmode=disable", true),
            Ok(Protection::Disabled)
        );
    }

    #[test]
    fn this_machine_keeps_the_driver_s_default() {
        for url in [
            "postgres://mcp@127.0.0.1/mcp",
            "postgres://mcp@localhost:5433/mcp",
            "postgres://mcp@[::1]/mcp",
            "postgres:///mcp?host=/var/run/postgresql",
        ] {
            assert_eq!(protection(url, false), Ok(Protection::Preferred), "{url}");
        }
        assert!(protection("postgres://mcp@127.0.0.1/mcp?sslmode=disable", false).is_ok());
        assert!(
            protection("postgres:///mcp?host=db.internal&sslmode=prefer", false).is_err(),
            "a remote host given as a parameter"
        );
    }

    #[test]
    fn an_unknown_mode_says_which_exist() {
        let refused =
            protection("postgres://mcp@db.internal/mcp?sslmode=maybe", false).unwrap_err();
        assert!(refused.contains("verify-full"), "{refused}");
    }
}
