//! How the PostgreSQL store's connection is protected: verified TLS to any host that is not
//! this machine, unless the operator accepts less in so many words. libpq's own default,
//! `prefer`, lets anyone on the path answer "no TLS here" and read the grants go by.

use std::net::IpAddr;
use std::str::FromStr;

use postgres::config::Host;

/// What the connection insists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// TLS, the server's certificate verified (chain and host name) against the system's
    /// roots and `sslrootcert`.
    Required,
    /// TLS if the server offers it, else plain (`prefer`).
    Preferred,
    /// Plain (`disable`).
    Disabled,
}

/// What a `postgres://` URL's connection must insist on. A host other than this machine
/// gets verified TLS unless `sslmode` says otherwise, and a weaker `sslmode` for such a host
/// is refused unless `allow_plaintext` (`--oauth-store-allow-plaintext`). The URL's text
/// itself (`verify-full`, `sslrootcert`) is [`crate::postgres_dsn`]'s to read.
pub fn protection(raw: &str, allow_plaintext: bool) -> Result<Protection, String> {
    // The mode as written (the driver reads an absent one as `prefer`).
    let query = raw.split_once('?').map_or("", |(_, query)| query);
    let query = query.split_once('#').map_or(query, |(query, _)| query);
    let mode = url::form_urlencoded::parse(query.as_bytes())
        .filter(|(key, _)| key == "sslmode")
        .map(|(_, value)| value.into_owned())
        .last();
    if let Some(other) = mode.as_deref().filter(|m| {
        !matches!(
            *m,
            "require" | "verify-ca" | "verify-full" | "prefer" | "disable"
        )
    }) {
        return Err(format!(
            "--oauth-store sslmode={other} is not a mode this store takes: use require or verify-full (verified TLS), or prefer or disable"
        ));
    }
    // The hosts as the driver will dial them: every host of the authority (several, with
    // ports, percent-encoded socket paths), every `host=` and `hostaddr=` parameter.
    let dsn = crate::postgres_dsn::read(raw);
    let config = postgres::Config::from_str(&dsn.text).map_err(|e| {
        format!("--oauth-store: not a PostgreSQL connection string ({e}); e.g. postgres://mcp@db.internal/mcp_stdio")
    })?;
    let remote = config.get_hosts().iter().any(|host| match host {
        Host::Tcp(name) => !is_this_machine(name),
        Host::Unix(_) => false,
    }) || config
        .get_hostaddrs()
        .iter()
        .any(|address| !address.is_loopback());
    match mode.as_deref() {
        None if remote => Ok(Protection::Required),
        None => Ok(Protection::Preferred),
        Some("require" | "verify-ca" | "verify-full") => Ok(Protection::Required),
        Some(weak @ ("prefer" | "disable")) => {
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
        Some(other) => unreachable!("sslmode={other} was refused above"),
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
        for mode in ["prefer", "disable"] {
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

    /// The driver dials every host it is given: one of them being this machine does not
    /// make the others safe.
    #[test]
    fn every_host_the_driver_would_dial_counts() {
        for url in [
            "postgres://localhost/db?host=db.remote",
            "postgres://localhost/db?hostaddr=10.0.0.5",
            "postgres://127.0.0.1:5432,db.remote:5432/db",
            "postgresql://[::1]:5432,[2001:db8::1]:5432/db",
        ] {
            assert_eq!(protection(url, false), Ok(Protection::Required), "{url}");
            let weak = format!(
                "{url}{}sslmode=prefer",
                if url.contains('?') { "&" } else { "?" }
            );
            assert!(protection(&weak, false).is_err(), "{weak}");
        }
        for url in [
            "postgres://%2Fvar%2Frun%2Fpostgresql/db",
            "postgres://localhost:5432,127.0.0.1:5433/db",
        ] {
            assert_eq!(protection(url, false), Ok(Protection::Preferred), "{url}");
        }
    }

    #[test]
    fn an_unknown_mode_says_which_exist() {
        // libpq's `allow` (plain first) is one the driver does not have.
        let allow = protection("postgres://mcp@localhost/mcp?sslmode=allow", true).unwrap_err();
        assert!(allow.contains("prefer or disable"), "{allow}");
        let refused =
            protection("postgres://mcp@db.internal/mcp?sslmode=maybe", false).unwrap_err();
        assert!(refused.contains("verify-full"), "{refused}");
    }
}
