//! The introduction a replica sends with a request it forwards (`mcp-stdio-peer`): sealed
//! with the cluster key, it says who the caller is (the forwarding replica already checked
//! the bearer, so the owner neither needs nor sees it), when it was made, and which
//! request it is for (method, session, a digest of the body), so a captured header cannot
//! be reused for another request or after a minute.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{HeaderValue, Method};

use super::Cluster;

pub const PEER_HEADER: &str = "mcp-stdio-peer";
/// How old (or, for clock skew, how far ahead) an introduction may be. A forward is sent
/// the moment it is made, so this only has to cover clocks that disagree; not a resource
/// bound.
const MAX_AGE: Duration = Duration::from_secs(60);

/// A verified introduction: the request came from a replica of this cluster.
#[derive(Debug)]
pub struct Introduction {
    /// The caller as the forwarding replica authenticated it.
    pub principal: Option<String>,
    /// SHA-256 of the body the forwarder sent, base64url: the owner compares it.
    body: String,
}

impl Introduction {
    /// Whether `body` is the body this introduction was made for.
    pub fn vouches_for(&self, body: &[u8]) -> bool {
        digest(body) == self.body
    }
}

impl Cluster {
    /// The header for forwarding `method` on `session` with `body` for `principal`.
    pub fn introduce(
        &self,
        method: &Method,
        session: Option<&str>,
        body: &[u8],
        principal: Option<&str>,
    ) -> HeaderValue {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let who = principal.map_or_else(|| "-".to_owned(), |p| format!("={p}"));
        let plain = format!(
            "{now}\n{method}\n{}\n{}\n{who}",
            session.unwrap_or(""),
            digest(body)
        );
        HeaderValue::from_str(&self.peers.seal(plain.as_bytes()))
            .expect("sealed values are base64url")
    }

    /// The introduction on a request, if a replica of this cluster made it for this
    /// method and session within the last minute; why not, otherwise (for the log).
    pub fn introduction(
        &self,
        value: &HeaderValue,
        method: &Method,
        session: Option<&str>,
    ) -> Result<Introduction, &'static str> {
        let sealed = value.to_str().map_err(|_| "not text")?;
        let plain = self
            .peers
            .open(sealed)
            .ok_or("not sealed with this cluster's key")?;
        let plain = String::from_utf8(plain).map_err(|_| "not text")?;
        let mut fields = plain.splitn(5, '\n');
        let (Some(at), Some(for_method), Some(for_session), Some(body), Some(who)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err("malformed");
        };
        let at: u64 = at.parse().map_err(|_| "malformed")?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        if now.abs_diff(at) > MAX_AGE.as_secs() {
            return Err("older than a minute (or the replicas' clocks disagree)");
        }
        if for_method != method.as_str() || for_session != session.unwrap_or("") {
            return Err("made for another request");
        }
        let principal = match who {
            "-" => None,
            named => Some(named.strip_prefix('=').ok_or("malformed")?.to_owned()),
        };
        Ok(Introduction {
            principal,
            body: body.to_owned(),
        })
    }
}

fn digest(body: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::cluster::ClusterConfig;

    fn cluster(key: &str) -> Cluster {
        let config = ClusterConfig::with_key(key, "http://127.0.0.1:1").unwrap();
        Cluster::new(&config, Duration::from_secs(1), Duration::from_secs(3600))
    }

    const KEY: &str = "a-cluster-key-of-more-than-thirty-two-bytes-AAAA";

    #[test]
    fn an_introduction_holds_only_for_its_own_request() {
        let a = cluster(KEY);
        let header = a.introduce(&Method::POST, Some("s1"), b"{}", Some("alice"));
        let intro = a
            .introduction(&header, &Method::POST, Some("s1"))
            .expect("genuine");
        assert_eq!(intro.principal.as_deref(), Some("alice"));
        assert!(intro.vouches_for(b"{}"));
        assert!(!intro.vouches_for(b"{\"other\":1}"), "another body");
        assert!(
            a.introduction(&header, &Method::DELETE, Some("s1"))
                .is_err(),
            "another method"
        );
        assert!(
            a.introduction(&header, &Method::POST, Some("s2")).is_err(),
            "another session"
        );
        assert!(
            a.introduction(&header, &Method::POST, None).is_err(),
            "no session"
        );
        let nobody = a.introduce(&Method::GET, None, b"", None);
        assert_eq!(
            a.introduction(&nobody, &Method::GET, None)
                .unwrap()
                .principal,
            None
        );
        let multiline = a.introduce(&Method::GET, None, b"", Some("odd\nname"));
        assert_eq!(
            a.introduction(&multiline, &Method::GET, None)
                .unwrap()
                .principal
                .as_deref(),
            Some("odd\nname")
        );
    }

    #[test]
    fn forged_stale_and_foreign_introductions_are_refused() {
        let a = cluster(KEY);
        let stranger = cluster("another-cluster-key-longer-than-thirty-two-bytes-B");
        let foreign = stranger.introduce(&Method::POST, None, b"", None);
        assert!(a.introduction(&foreign, &Method::POST, None).is_err());
        for forged in [
            "1",
            "=alice",
            "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        ] {
            let value = HeaderValue::from_static(forged);
            assert!(a.introduction(&value, &Method::POST, None).is_err());
        }
        let stale = format!("{}\nPOST\n\n{}\n-", 1_000, digest(b""));
        let value = HeaderValue::from_str(&a.peers.seal(stale.as_bytes())).unwrap();
        assert_eq!(
            a.introduction(&value, &Method::POST, None).unwrap_err(),
            "older than a minute (or the replicas' clocks disagree)"
        );
    }
}
