//! `requestState` for calls the relay parks (§4.10): an opaque handle to a legacy server's
//! call that is waiting for the host's input, integrity-protected so a host cannot resume a
//! call it was not given, or resume it as another method or tool.

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const PREFIX: &str = "mcp-stdio.1.";

/// The state for parked call `id` of `method` (and tool or prompt `name`, if any).
pub fn sign(key: &[u8], id: u64, method: &str, name: Option<&str>) -> String {
    let tag = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, key),
        &message(id, method, name),
    );
    format!("{PREFIX}{id}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

/// The parked call a state names, if it was made by [`sign`] with this key for this
/// method and name.
pub fn verify(key: &[u8], state: &str, method: &str, name: Option<&str>) -> Option<u64> {
    let rest = state.strip_prefix(PREFIX)?;
    let (id, tag) = rest.split_once('.')?;
    let id: u64 = id.parse().ok()?;
    let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
    hmac::verify(
        &hmac::Key::new(hmac::HMAC_SHA256, key),
        &message(id, method, name),
        &tag,
    )
    .ok()?;
    Some(id)
}

fn message(id: u64, method: &str, name: Option<&str>) -> Vec<u8> {
    format!("{id}\n{method}\n{}", name.unwrap_or_default()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_resumes_only_its_own_call() {
        let key = [7u8; 32];
        let state = sign(&key, 42, "tools/call", Some("deploy"));
        assert_eq!(verify(&key, &state, "tools/call", Some("deploy")), Some(42));
        assert_eq!(verify(&key, &state, "tools/call", Some("other")), None);
        assert_eq!(verify(&key, &state, "prompts/get", Some("deploy")), None);
        assert_eq!(
            verify(&[8u8; 32], &state, "tools/call", Some("deploy")),
            None
        );
        let forged = state.replace(".42.", ".43.");
        assert_eq!(verify(&key, &forged, "tools/call", Some("deploy")), None);
        assert_eq!(verify(&key, "garbage", "tools/call", None), None);
    }
}
