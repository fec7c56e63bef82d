//! The cluster key (`--cluster-key-file`): a secret every `serve` replica shares, from which each purpose gets its own AES-256-GCM key by
//! HKDF-SHA256 (a sealed session id never opens as a `requestState`). Sealing is
//! authenticated encryption with a fresh random nonce; opening tries the current key, then
//! the previous one, so a key rotates without breaking what is in flight: seal with the
//! new key while the old one still opens. On the ground floor: serve and `parking/` both
//! seal.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The shortest key line accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;
/// The first byte of every sealed value: the format.
const VERSION: u8 = 1;
const SALT: &[u8] = b"mcp-stdio cluster key v1";

/// The key file's secrets: the one that seals, and the one that still opens.
pub struct ClusterKey {
    current: Vec<u8>,
    previous: Option<Vec<u8>>,
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(<redacted>)")
    }
}

impl ClusterKey {
    /// Reads a key file: its first non-empty line is the current key, an optional second
    /// the previous one (each at least `MIN_KEY_BYTES`). The file must be readable by its
    /// owner only.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let shown = path.display();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .map_err(|e| format!("cannot read the cluster key file {shown}: {e}"))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(format!(
                    "the cluster key file {shown} is readable by others (mode {:o}): chmod 600 it",
                    mode & 0o777
                ));
            }
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the cluster key file {shown}: {e}"))?;
        Self::parse(&text).map_err(|why| format!("the cluster key file {shown}: {why}"))
    }

    /// The key file's text (see `load`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let current = lines
            .next()
            .ok_or("it is empty; put a random secret in it, e.g. `openssl rand -base64 48`")?;
        let previous = lines.next();
        if lines.next().is_some() {
            return Err(
                "it holds more than two keys (the current one, then the previous one)".into(),
            );
        }
        for key in std::iter::once(current).chain(previous) {
            if key.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "a key is {} bytes; each must be at least {MIN_KEY_BYTES}, e.g. `openssl rand -base64 48`",
                    key.len()
                ));
            }
        }
        Ok(ClusterKey {
            current: current.as_bytes().to_vec(),
            previous: previous.map(|p| p.as_bytes().to_vec()),
        })
    }

    /// A key of this process's own, never written anywhere: for what one `serve` seals
    /// for itself (a sign-in's state), which no other process needs to open.
    pub fn random() -> Self {
        let secret = crate::oauth::pkce::random_token(48);
        ClusterKey {
            current: secret.expose().as_bytes().to_vec(),
            previous: None,
        }
    }

    /// The sealer for one purpose (e.g. `session-id`, `request-state`).
    pub fn sealer(&self, purpose: &'static str) -> Sealer {
        Sealer {
            purpose,
            current: derive(&self.current, purpose),
            previous: self.previous.as_deref().map(|key| derive(key, purpose)),
        }
    }
}

impl ClusterKey {
    /// A 256-bit secret for one purpose (an HMAC key), from the current key and then the
    /// previous one: sign with the first, accept any.
    pub fn secrets(&self, purpose: &'static str) -> Vec<[u8; 32]> {
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .map(|key| {
                let mut out = [0u8; 32];
                Salt::new(HKDF_SHA256, SALT)
                    .extract(key)
                    .expand(&[purpose.as_bytes()], Length32)
                    .expect("HKDF can make 32 bytes")
                    .fill(&mut out)
                    .expect("HKDF fills 32 bytes");
                out
            })
            .collect()
    }
}

/// HKDF output of 32 bytes.
struct Length32;

impl aws_lc_rs::hkdf::KeyType for Length32 {
    fn len(&self) -> usize {
        32
    }
}

fn derive(secret: &[u8], purpose: &str) -> LessSafeKey {
    let info = [purpose.as_bytes()];
    let prk = Salt::new(HKDF_SHA256, SALT).extract(secret);
    let okm = prk
        .expand(&info, &AES_256_GCM)
        .expect("HKDF can make one AES-256 key");
    LessSafeKey::new(UnboundKey::from(okm))
}

/// Seals and opens values for one purpose.
pub struct Sealer {
    purpose: &'static str,
    current: LessSafeKey,
    previous: Option<LessSafeKey>,
}

impl Sealer {
    /// `plaintext`, encrypted and authenticated, as URL-safe text.
    pub fn seal(&self, plaintext: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).expect("the system's random source");
        let mut sealed = plaintext.to_vec();
        self.current
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.purpose.as_bytes()),
                &mut sealed,
            )
            .expect("AES-GCM seals any length we use");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The plaintext of a value this cluster sealed for this purpose; `None` for anything
    /// else (tampered, truncated, another key or purpose, not ours at all).
    pub fn open(&self, sealed: &str) -> Option<Vec<u8>> {
        let bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION || rest.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return None;
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .find_map(|key| {
                let mut buffer = body.to_vec();
                let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
                key.open_in_place(nonce, Aad::from(self.purpose.as_bytes()), &mut buffer)
                    .ok()
                    .map(|plain| plain.to_vec())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a-cluster-key-of-more-than-thirty-two-bytes-AAAA";
    const B: &str = "another-cluster-key-longer-than-thirty-two-bytes-B";

    #[test]
    fn a_sealed_value_opens_with_the_same_key_and_purpose_only() {
        let key = ClusterKey::parse(A).unwrap();
        let sessions = key.sealer("session-id");
        let sealed = sessions.seal(b"owner=http://10.0.0.7:8080 id=42");
        assert_eq!(
            sessions.open(&sealed).unwrap(),
            b"owner=http://10.0.0.7:8080 id=42"
        );
        assert_ne!(
            sessions.seal(b"x"),
            sessions.seal(b"x"),
            "a fresh nonce every time"
        );
        assert!(
            key.sealer("request-state").open(&sealed).is_none(),
            "another purpose"
        );
        let other = ClusterKey::parse(B).unwrap();
        assert!(
            other.sealer("session-id").open(&sealed).is_none(),
            "another key"
        );
        assert!(!sealed.contains("10.0.0.7"), "the address is not readable");
    }

    #[test]
    fn tampered_truncated_and_foreign_values_do_not_open() {
        let sessions = ClusterKey::parse(A).unwrap().sealer("session-id");
        let sealed = sessions.seal(b"secret routing");
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
        for i in [0, 1, 13, bytes.len() - 1] {
            bytes[i] ^= 1;
            assert!(
                sessions.open(&URL_SAFE_NO_PAD.encode(&bytes)).is_none(),
                "byte {i}"
            );
            bytes[i] ^= 1;
        }
        for cut in [0, 1, 12, 13, bytes.len() - 1] {
            assert!(
                sessions
                    .open(&URL_SAFE_NO_PAD.encode(&bytes[..cut]))
                    .is_none(),
                "cut {cut}"
            );
        }
        for junk in ["", "not base64 !", "AAAA", &"A".repeat(200)] {
            assert!(sessions.open(junk).is_none(), "{junk}");
        }
    }

    #[test]
    fn secrets_differ_by_purpose_and_survive_a_rotation() {
        let old = ClusterKey::parse(A).unwrap();
        let rotated = ClusterKey::parse(&format!("{B}\n{A}")).unwrap();
        assert_eq!(old.secrets("csrf").len(), 1);
        assert_ne!(old.secrets("csrf")[0], old.secrets("other")[0]);
        assert_eq!(rotated.secrets("csrf")[1], old.secrets("csrf")[0]);
        assert_ne!(rotated.secrets("csrf")[0], old.secrets("csrf")[0]);
    }

    #[test]
    fn a_rotated_key_still_opens_what_the_old_one_sealed() {
        let old = ClusterKey::parse(A).unwrap().sealer("session-id");
        let before = old.seal(b"in flight");
        let rotated = ClusterKey::parse(&format!("{B}\n{A}\n"))
            .unwrap()
            .sealer("session-id");
        assert_eq!(rotated.open(&before).unwrap(), b"in flight");
        let after = rotated.seal(b"new");
        assert!(old.open(&after).is_none(), "new seals use the new key");
        let retired = ClusterKey::parse(B).unwrap().sealer("session-id");
        assert!(
            retired.open(&before).is_none(),
            "once the old key is gone, so is what it sealed"
        );
    }

    #[test]
    fn the_key_file_must_be_private_and_long_enough() {
        assert!(ClusterKey::parse("").unwrap_err().contains("empty"));
        assert!(
            ClusterKey::parse("short")
                .unwrap_err()
                .contains("at least 32")
        );
        assert!(
            ClusterKey::parse(&format!("{A}\n{B}\n{A}"))
                .unwrap_err()
                .contains("more than two")
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.key");
        std::fs::write(&path, A).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
            assert!(ClusterKey::load(&path).unwrap_err().contains("chmod 600"));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let key = ClusterKey::load(&path).unwrap();
        assert_eq!(format!("{key:?}"), "ClusterKey(<redacted>)");
    }
}
