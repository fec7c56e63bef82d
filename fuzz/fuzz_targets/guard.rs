//! The `Host` / `Origin` guard (`serve::guard`): never panics; on a loopback bind, a
//! request naming a host that is not loopback, the bind address or an allowed name is
//! refused; `host_name` returns a part of what it was given.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};

use libfuzzer_sys::fuzz_target;
use mcp_stdio::serve::guard::{Guards, host_name};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else { return };
    let guards = Guards {
        loopback: true,
        bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: 8080,
        allowed_origins: vec!["https://app.example.com".into()],
        allowed_hosts: vec!["mcp.example.com".into()],
        trusted_proxies: Vec::new(),
    };
    let name = host_name(text);
    assert!(text.contains(name), "{name:?} is not part of {text:?}");
    if guards.check_host(Some(text)).is_ok() {
        let name = name.to_ascii_lowercase();
        let name = name.trim_start_matches('[').trim_end_matches(']');
        assert!(
            name == "localhost"
                || name.ends_with(".localhost")
                || name == "mcp.example.com"
                || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()),
            "Host {text:?} passed the guard"
        );
    }
    let origins: Vec<&str> = text.split('\n').take(3).collect();
    if guards.check_origin(&origins).is_ok() {
        assert!(origins.len() <= 1, "more than one Origin passed");
    }
});
