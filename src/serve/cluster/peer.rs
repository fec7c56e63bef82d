//! The introduction a replica sends with a request it forwards (`mcp-stdio-peer`): sealed
//! with the cluster key, it says who the caller is (the forwarding replica already checked
//! the bearer, so the owner neither needs nor sees it), when it was made, its number in
//! the sender's count, and exactly which request it is for: the replica it is sent to, the
//! method, the path and query, the session, `Last-Event-ID` and a digest of the body. The
//! owner accepts a number once (`replay.rs`) and only for a few seconds, so a header
//! captured on the replica hop cannot be reused: not again, not for another request, not at
//! another replica, not later.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{HeaderValue, Method};

use super::Cluster;
use super::replay::FirstUse;
use crate::policy::Principal;

pub const PEER_HEADER: &str = "mcp-stdio-peer";
/// How old (or, for clock skew, how far ahead) an introduction may be. A forward is sent
/// the moment it is made, so this covers the hop and clocks that disagree a little (keep
/// the replicas' clocks synchronised, as NTP does); not a resource bound.
pub const MAX_AGE: Duration = Duration::from_secs(5);
/// What marks this format; an introduction from an earlier release has none.
const VERSION: &str = "v3";

/// What an introduction is made for and checked against: everything of the request that
/// decides what it does, besides its body (a digest, checked once the body is read).
#[derive(Debug, Clone, Copy)]
pub struct Bound<'a> {
    /// The replica it goes to, as it advertises itself.
    pub to: &'a str,
    pub method: &'a Method,
    pub path_and_query: &'a str,
    pub session: Option<&'a str>,
    pub last_event_id: Option<&'a str>,
}

/// A verified introduction: the request came from a replica of this cluster.
#[derive(Debug)]
pub struct Introduction {
    /// The caller as the forwarding replica authenticated it.
    pub principal: Option<String>,
    /// What a policy rule saw of the caller there (its claims, scopes, groups).
    pub identity: Option<Principal>,
    /// SHA-256 of the body the forwarder sent, base64url: the owner compares it.
    body: String,
}

impl Introduction {
    /// Whether `body` is the body this introduction was made for.
    pub fn vouches_for(&self, body: &[u8]) -> bool {
        digest(body) == self.body
    }
}

/// Why an introduction is not accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Forged, foreign, malformed, made for another request, or too old (for the log).
    Invalid(&'static str),
    /// Its number was seen before: a captured header sent again.
    Replayed,
    /// `--peer-max-senders` replicas are remembered; this new one cannot be.
    Busy(usize),
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// A field as it is sealed: text that holds no newline (header values and request
/// targets cannot) and an absent one told apart from an empty one.
fn field(value: Option<&str>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("={v}"))
}

impl Cluster {
    /// The header for forwarding the request `bound` with `body` for `principal` (what a
    /// policy rule sees of it unknown).
    pub fn introduce(
        &self,
        bound: &Bound<'_>,
        body: &[u8],
        principal: Option<&str>,
    ) -> HeaderValue {
        self.introduce_as(bound, body, principal, None)
    }

    /// The header for forwarding the request `bound` with `body` for `principal`, with
    /// what a policy rule sees of it (`identity`: its claims, scopes and groups), so the
    /// owner judges the request as this replica would have.
    pub fn introduce_as(
        &self,
        bound: &Bound<'_>,
        body: &[u8],
        principal: Option<&str>,
        identity: Option<&Principal>,
    ) -> HeaderValue {
        let stamp = self.sequences.stamp(bound.to);
        // Compact JSON holds no newline: the field stays one line.
        let identity = identity.map(|i| i.to_json().to_string());
        let plain = format!(
            "{VERSION}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
            unix_now(),
            stamp,
            bound.to,
            bound.method,
            bound.path_and_query,
            field(bound.session),
            field(bound.last_event_id),
            digest(body),
            field(identity.as_deref()),
            field(principal),
        );
        HeaderValue::from_str(&self.peers.seal(plain.as_bytes()))
            .expect("sealed values are base64url")
    }

    /// The introduction on a request, if a replica of this cluster made it for exactly
    /// this request to this replica within the last few seconds and it was not seen
    /// before; why not, otherwise.
    pub fn introduction(
        &self,
        value: &HeaderValue,
        request: &Bound<'_>,
    ) -> Result<Introduction, Refused> {
        let sealed = value.to_str().map_err(|_| Refused::Invalid("not text"))?;
        let plain = self
            .peers
            .open(sealed)
            .ok_or(Refused::Invalid("not sealed with this cluster's key"))?;
        let plain = String::from_utf8(plain).map_err(|_| Refused::Invalid("not text"))?;
        let fields: Vec<&str> = plain.splitn(11, '\n').collect();
        let [
            version,
            at,
            stamp,
            to,
            method,
            target,
            session,
            last_event_id,
            body,
            identity,
            who,
        ] = fields[..]
        else {
            return Err(Refused::Invalid("malformed (from an earlier release?)"));
        };
        if version != VERSION {
            return Err(Refused::Invalid("malformed (from an earlier release?)"));
        }
        let at: u64 = at.parse().map_err(|_| Refused::Invalid("malformed"))?;
        if unix_now().abs_diff(at) > MAX_AGE.as_secs() {
            return Err(Refused::Invalid(
                "older than its few seconds (or the replicas' clocks disagree)",
            ));
        }
        if to != request.to {
            return Err(Refused::Invalid("made for another replica"));
        }
        if method != request.method.as_str()
            || target != request.path_and_query
            || session != field(request.session)
            || last_event_id != field(request.last_event_id)
        {
            return Err(Refused::Invalid("made for another request"));
        }
        let principal = match who {
            "-" => None,
            named => Some(
                named
                    .strip_prefix('=')
                    .ok_or(Refused::Invalid("malformed"))?
                    .to_owned(),
            ),
        };
        let identity = match identity {
            "-" => None,
            json => Some(
                json.strip_prefix('=')
                    .and_then(|j| serde_json::from_str(j).ok())
                    .and_then(|j| Principal::from_json(&j))
                    .ok_or(Refused::Invalid("malformed"))?,
            ),
        };
        // Last, so that nothing invalid is recorded.
        match self.replays.first_use(stamp) {
            FirstUse::Yes => {}
            FirstUse::Seen => return Err(Refused::Replayed),
            FirstUse::Full(max) => return Err(Refused::Busy(max)),
            FirstUse::Malformed => return Err(Refused::Invalid("malformed")),
        }
        Ok(Introduction {
            principal,
            identity,
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

    fn cluster(key: &str, advertise: &str) -> Cluster {
        let config = ClusterConfig::with_key(key, advertise).unwrap();
        Cluster::new(&config, Duration::from_secs(1), Duration::from_secs(3600))
    }

    const KEY: &str = "a-cluster-key-of-more-than-thirty-two-bytes-AAAA";
    const OWNER: &str = "http://127.0.0.1:1";

    fn post<'a>(session: Option<&'a str>) -> Bound<'a> {
        Bound {
            to: OWNER,
            method: &Method::POST,
            path_and_query: "/mcp",
            session,
            last_event_id: None,
        }
    }

    #[test]
    fn an_introduction_holds_once_and_only_for_its_own_request() {
        let (sender, owner) = (cluster(KEY, "http://127.0.0.1:2"), cluster(KEY, OWNER));
        let header = sender.introduce(&post(Some("s1")), b"{}", Some("alice"));
        let intro = owner
            .introduction(&header, &post(Some("s1")))
            .expect("genuine");
        assert_eq!(intro.principal.as_deref(), Some("alice"));
        assert!(intro.vouches_for(b"{}"));
        assert!(!intro.vouches_for(b"{\"other\":1}"), "another body");
        assert_eq!(
            owner.introduction(&header, &post(Some("s1"))).unwrap_err(),
            Refused::Replayed,
            "once"
        );
        let get = Bound {
            method: &Method::GET,
            last_event_id: Some("7"),
            ..post(Some("s1"))
        };
        let variants: [(&str, Bound<'_>); 7] = [
            (
                "another method",
                Bound {
                    method: &Method::DELETE,
                    ..post(Some("s1"))
                },
            ),
            ("another session", post(Some("s2"))),
            ("no session", post(None)),
            (
                "another path",
                Bound {
                    path_and_query: "/mcp?x=1",
                    ..post(Some("s1"))
                },
            ),
            (
                "another Last-Event-ID",
                Bound {
                    last_event_id: Some("0"),
                    ..get
                },
            ),
            (
                "no Last-Event-ID",
                Bound {
                    last_event_id: None,
                    ..get
                },
            ),
            (
                "an empty Last-Event-ID",
                Bound {
                    last_event_id: Some(""),
                    ..get
                },
            ),
        ];
        for (what, other) in variants {
            let header = sender.introduce(&post(Some("s1")), b"", None);
            let header = if *other.method == Method::GET {
                sender.introduce(&get, b"", None)
            } else {
                header
            };
            assert_eq!(
                owner.introduction(&header, &other).unwrap_err(),
                Refused::Invalid("made for another request"),
                "{what}"
            );
        }
        // Made for one replica, sent to another.
        let elsewhere = cluster(KEY, "http://127.0.0.1:3");
        let header = sender.introduce(&post(None), b"", None);
        assert_eq!(
            elsewhere
                .introduction(
                    &header,
                    &Bound {
                        to: "http://127.0.0.1:3",
                        ..post(None)
                    }
                )
                .unwrap_err(),
            Refused::Invalid("made for another replica")
        );
        let nobody = sender.introduce(&get, b"", None);
        assert_eq!(owner.introduction(&nobody, &get).unwrap().principal, None);
        let multiline = sender.introduce(&post(None), b"", Some("odd\nname"));
        assert_eq!(
            owner
                .introduction(&multiline, &post(None))
                .unwrap()
                .principal
                .as_deref(),
            Some("odd\nname")
        );
    }

    #[test]
    fn what_a_policy_rule_sees_of_the_caller_goes_along() {
        let sender = cluster(KEY, "http://127.0.0.1:2");
        let owner = cluster(KEY, OWNER);
        let identity = Principal::new(
            Some("alice".into()),
            serde_json::json!({"sub": "alice", "role": "ops", "note": "two\nlines"}),
            vec!["mcp:tools".into()],
            None,
            vec!["admins".into()],
        );
        let header = sender.introduce_as(&post(None), b"", Some("alice"), Some(&identity));
        let introduced = owner.introduction(&header, &post(None)).unwrap();
        assert_eq!(introduced.principal.as_deref(), Some("alice"));
        assert_eq!(
            introduced.identity.map(|i| i.to_json()),
            Some(identity.to_json())
        );
    }

    #[test]
    fn forged_stale_old_format_and_foreign_introductions_are_refused() {
        let owner = cluster(KEY, OWNER);
        let stranger = cluster("another-cluster-key-longer-than-thirty-two-bytes-B", OWNER);
        let foreign = stranger.introduce(&post(None), b"", None);
        assert!(owner.introduction(&foreign, &post(None)).is_err());
        for forged in [
            "1",
            "=alice",
            "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        ] {
            let value = HeaderValue::from_static(forged);
            assert!(owner.introduction(&value, &post(None)).is_err());
        }
        let seal =
            |plain: String| HeaderValue::from_str(&owner.peers.seal(plain.as_bytes())).unwrap();
        let made_at = |at: u64| {
            seal(format!(
                "{VERSION}\n{at}\ntest.{at}\n{OWNER}\nPOST\n/mcp\n-\n-\n{}\n-\n-",
                digest(b"")
            ))
        };
        let now = unix_now();
        assert!(owner.introduction(&made_at(now - 2), &post(None)).is_ok());
        for at in [now - 6, now + 6, 1_000] {
            assert_eq!(
                owner.introduction(&made_at(at), &post(None)).unwrap_err(),
                Refused::Invalid("older than its few seconds (or the replicas' clocks disagree)"),
                "{at}"
            );
        }
        let earlier_release = seal(format!("{now}\nPOST\n\n{}\n-", digest(b"")));
        assert_eq!(
            owner
                .introduction(&earlier_release, &post(None))
                .unwrap_err(),
            Refused::Invalid("malformed (from an earlier release?)")
        );
    }
}
