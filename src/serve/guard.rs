//! The request guards that need no state: which `Origin` and `Host` values a request may
//! carry (DNS-rebinding protection), and which peers may speak for the client through
//! `X-Forwarded-*` headers.

use std::net::IpAddr;

use ipnet::IpNet;

/// What the guards allow, derived from the bind address and the flags.
#[derive(Debug, Clone)]
pub struct Guards {
    /// Bound to a loopback address: loopback origins and hosts are the local user's own.
    pub loopback: bool,
    /// The bound address, itself an acceptable `Host` (with or without the port).
    pub bind_ip: IpAddr,
    pub port: u16,
    /// `--allow-origin`: exact origins (`scheme://host[:port]`), compared case-insensitively.
    pub allowed_origins: Vec<String>,
    /// `--allow-host`: extra `Host` names (without port).
    pub allowed_hosts: Vec<String>,
    /// `--trusted-proxy`: peers whose `X-Forwarded-*` headers are believed.
    pub trusted_proxies: Vec<IpNet>,
}

/// Why a request is refused by a guard.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Origin(String),
    Host(String),
}

impl Guards {
    /// `Origin`: absent passes (non-browser clients); present, it must be allowed.
    pub fn check_origin(&self, origins: &[&str]) -> Result<(), Refusal> {
        match origins {
            [] => Ok(()),
            [one] if self.origin_allowed(one) => Ok(()),
            [one] => Err(Refusal::Origin(format!("Origin {one} is not allowed"))),
            _ => Err(Refusal::Origin("more than one Origin header".into())),
        }
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim();
        if self
            .allowed_origins
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(origin))
        {
            return true;
        }
        if !self.loopback || origin.eq_ignore_ascii_case("null") {
            return false;
        }
        let Ok(url) = url::Url::parse(origin) else {
            return false;
        };
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(is_loopback_name)
    }

    /// `Host` against the allowlist. With an unspecified bind address (0.0.0.0, ::) and no
    /// `--allow-host`, the public name is unknown and any host passes.
    pub fn check_host(&self, host: Option<&str>) -> Result<(), Refusal> {
        let Some(host) = host else {
            return Err(Refusal::Host("no Host header".into()));
        };
        let name = host_name(host);
        if self
            .allowed_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(name))
        {
            return Ok(());
        }
        if self.loopback && is_loopback_name(name) {
            return Ok(());
        }
        if name.parse::<IpAddr>().ok() == Some(self.bind_ip) {
            return Ok(());
        }
        if self.bind_ip.is_unspecified() && self.allowed_hosts.is_empty() {
            return Ok(());
        }
        Err(Refusal::Host(format!(
            "Host {host} is not one this server answers to (add it with --allow-host)"
        )))
    }

    /// Whether `peer`'s `X-Forwarded-*` headers are believed.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d.
        let peer = peer.to_canonical();
        self.trusted_proxies.iter().any(|net| net.contains(&peer))
    }
}

/// The name part of a `Host` value: `[::1]:8080` → `::1`, `example.com:80` → `example.com`.
pub fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn is_loopback_name(name: &str) -> bool {
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name.to_ascii_lowercase().ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guards(bind: &str) -> Guards {
        Guards {
            loopback: bind.parse::<IpAddr>().unwrap().is_loopback(),
            bind_ip: bind.parse().unwrap(),
            port: 8080,
            allowed_origins: vec!["https://claude.ai".into()],
            allowed_hosts: vec![],
            trusted_proxies: vec!["10.0.0.0/8".parse().unwrap()],
        }
    }

    #[test]
    fn origins() {
        let local = guards("127.0.0.1");
        assert!(local.check_origin(&[]).is_ok());
        assert!(local.check_origin(&["http://localhost:3000"]).is_ok());
        assert!(local.check_origin(&["http://127.0.0.1:9"]).is_ok());
        assert!(local.check_origin(&["https://claude.ai"]).is_ok());
        assert!(local.check_origin(&["https://evil.example"]).is_err());
        assert!(local.check_origin(&["null"]).is_err());
        assert!(
            local
                .check_origin(&["http://localhost", "http://localhost"])
                .is_err()
        );
        let public = guards("0.0.0.0");
        assert!(
            public.check_origin(&["http://localhost:3000"]).is_err(),
            "loopback origins only when bound to loopback"
        );
        assert!(public.check_origin(&["HTTPS://CLAUDE.AI"]).is_ok());
    }

    #[test]
    fn hosts() {
        let local = guards("127.0.0.1");
        assert!(local.check_host(Some("127.0.0.1:8080")).is_ok());
        assert!(local.check_host(Some("localhost:8080")).is_ok());
        assert!(local.check_host(Some("[::1]:8080")).is_ok());
        assert!(
            local.check_host(Some("attacker.example:8080")).is_err(),
            "DNS rebinding"
        );
        assert!(local.check_host(None).is_err());
        let public = guards("0.0.0.0");
        assert!(public.check_host(Some("mcp.example.com")).is_ok());
        let mut named = guards("0.0.0.0");
        named.allowed_hosts = vec!["mcp.example.com".into()];
        assert!(named.check_host(Some("mcp.example.com:443")).is_ok());
        assert!(named.check_host(Some("other.example.com")).is_err());
    }

    #[test]
    fn proxies() {
        let g = guards("127.0.0.1");
        assert!(g.trusts("10.1.2.3".parse().unwrap()));
        assert!(!g.trusts("192.168.1.1".parse().unwrap()));
        assert!(
            g.trusts("::ffff:10.1.2.3".parse().unwrap()),
            "dual-stack listener"
        );
        assert_eq!(host_name("example.com:80"), "example.com");
        assert_eq!(host_name("[::1]:80"), "::1");
    }
}
