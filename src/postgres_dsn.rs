//! A libpq connection string read the way libpq users write it (the sandbox's `--sql-dsn`,
//! serve's `--oauth-store`). The `postgres` crate knows `sslmode=disable|prefer|require`
//! only, and no `sslrootcert`; the DSNs people paste (the
//! seed's own, `…?sslmode=verify-full`) use both. `verify-full` and `verify-ca` become
//! `require` (rustls always checks the chain and the host name, so this is verify-full,
//! and for `verify-ca` stricter), and `sslrootcert=FILE` is taken out and trusted beside
//! the system's roots. Nothing here ever shows the DSN.

use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;

/// The DSN the `postgres` crate can read, and the extra root certificate file it named.
#[derive(Debug, PartialEq, Eq)]
pub struct Dsn {
    pub text: String,
    pub root_cert: Option<PathBuf>,
}

pub fn read(dsn: &str) -> Dsn {
    if dsn.starts_with("postgres://") || dsn.starts_with("postgresql://") {
        read_url(dsn)
    } else {
        read_key_values(dsn)
    }
}

fn read_url(dsn: &str) -> Dsn {
    static ROOT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"([?&])sslrootcert=([^&#]*)").expect("valid"));
    static MODE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"([?&])sslmode=verify-(full|ca)(&|#|$)").expect("valid"));
    let root_cert = ROOT
        .captures(dsn)
        .map(|c| PathBuf::from(percent_decode(&c[2])));
    let without = ROOT.replace(dsn, "$1");
    // `?&x` and `&&` and a trailing separator from the removal.
    let without = without.replace("?&", "?").replace("&&", "&");
    let without = without
        .strip_suffix(['?', '&'])
        .unwrap_or(&without)
        .to_owned();
    let text = MODE.replace(&without, "${1}sslmode=require$3").into_owned();
    Dsn { text, root_cert }
}

fn read_key_values(dsn: &str) -> Dsn {
    static ROOT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(^|\s)sslrootcert\s*=\s*('(?:[^'\\]|\\.)*'|\S+)").expect("valid")
    });
    static MODE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(^|\s)sslmode\s*=\s*'?verify-(?:full|ca)'?(\s|$)").expect("valid")
    });
    let root_cert = ROOT.captures(dsn).map(|c| {
        let value = &c[2];
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .map_or_else(
                || value.to_owned(),
                |v| v.replace("\\'", "'").replace("\\\\", "\\"),
            );
        PathBuf::from(value)
    });
    // The match takes the space before it too, so nothing is left doubled.
    let without = ROOT.replace(dsn, "");
    let text = MODE.replace(&without, "${1}sslmode=require$2").into_owned();
    Dsn { text, root_cert }
}

/// `%2F` → `/`: a path in a URL's query is percent-encoded.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsn(text: &str, root: Option<&str>) -> Dsn {
        Dsn {
            text: text.into(),
            root_cert: root.map(PathBuf::from),
        }
    }

    #[test]
    fn urls_keep_everything_but_what_the_driver_cannot_read() {
        let plain = "postgresql://mcp_reader:pw@db:5432/app";
        assert_eq!(read(plain), dsn(plain, None));
        assert_eq!(
            read("postgresql://u@db/app?sslmode=verify-full"),
            dsn("postgresql://u@db/app?sslmode=require", None)
        );
        assert_eq!(
            read("postgres://u@db/app?sslmode=verify-ca&connect_timeout=5"),
            dsn(
                "postgres://u@db/app?sslmode=require&connect_timeout=5",
                None
            )
        );
        assert_eq!(
            read("postgresql://u@db/app?sslrootcert=%2Fetc%2Fca.pem&sslmode=verify-full"),
            dsn("postgresql://u@db/app?sslmode=require", Some("/etc/ca.pem"))
        );
        assert_eq!(
            read("postgresql://u@db/app?sslmode=verify-full&sslrootcert=/etc/ca.pem"),
            dsn("postgresql://u@db/app?sslmode=require", Some("/etc/ca.pem"))
        );
        assert_eq!(
            read("postgresql://u@db/app?a=1&sslrootcert=/c.pem&b=2"),
            dsn("postgresql://u@db/app?a=1&b=2", Some("/c.pem"))
        );
        // Not a mode to rewrite: `verify-fullish` stays, and the driver refuses it.
        assert_eq!(
            read("postgresql://u@db/app?sslmode=verify-fullish").text,
            "postgresql://u@db/app?sslmode=verify-fullish"
        );
    }

    #[test]
    fn key_value_strings_too() {
        assert_eq!(
            read("host=db user=u sslmode=verify-full sslrootcert=/etc/ca.pem dbname=app"),
            dsn(
                "host=db user=u sslmode=require dbname=app",
                Some("/etc/ca.pem")
            )
        );
        assert_eq!(
            read("host=db sslrootcert='/my certs/ca.pem' sslmode = 'verify-ca'"),
            dsn("host=db sslmode=require", Some("/my certs/ca.pem"))
        );
        assert_eq!(
            read("host=db password='sslmode=verify-full'").text,
            "host=db password='sslmode=verify-full'",
            "a value that looks like the key is left alone"
        );
    }
}
