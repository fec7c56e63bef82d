//! JWT access-token checks (resource-server mode): only a token this target signed with
//! its key, for this issuer and audience, passes. Arbitrary text never does; a signed token
//! changed anywhere passes only if it still says exactly what was signed; a header naming
//! `none`, an HMAC keyed with the public key, another algorithm or another key id never
//! passes; and a JWKS document of arbitrary bytes never panics the parser.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header, Validation, decode_header};
use libfuzzer_sys::fuzz_target;
use mcp_stdio::serve::auth::claims::Claims;
use mcp_stdio::serve::auth::jwt::{claim_checks, signed_claims};
use mcp_stdio::jwks::{Key, KeySet};

/// A throwaway P-256 key (PKCS#8, base64) made for this target alone; it signs nothing
/// anywhere else.
const PRIVATE_PKCS8: &str = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgkVrEjadrk86p/A/9\
INdaMStlvFut/0HwUlmYVoNBrhKhRANCAAQ4qYRToJ4wfZa83WW6InfPgKDvka8h\
GJVhzeWXDndULVq0Hls6szCDxCfSEcP9b980gprIoKMAAmHxBeHyCWZt";
const X: &str = "OKmEU6CeMH2WvN1luiJ3z4Cg75GvIRiVYc3llw53VC0";
const Y: &str = "WrQeWzqzMIPEJ9IRw_1v3zSCmsigowACYfEF4fIJZm0";
const ISSUER: &str = "https://issuer.example/";
const AUDIENCE: &str = "https://mcp.example/mcp";

struct World {
    keys: KeySet,
    checks: Validation,
    token: String,
    payload: serde_json::Value,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let jwks = serde_json::json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", "x": X, "y": Y}]});
        let keys = KeySet::parse(jwks.to_string().as_bytes()).unwrap();
        let payload = serde_json::json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "fuzz-user",
            "exp": 4_000_000_000u64, "scope": "mcp:tools"});
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        let der = base64::engine::general_purpose::STANDARD.decode(PRIVATE_PKCS8).unwrap();
        let signer = EncodingKey::from_ec_der(&der);
        let token = jsonwebtoken::encode(&header, &payload, &signer).unwrap();
        let world = World { keys, checks: claim_checks(ISSUER, AUDIENCE, Duration::from_secs(60)), token, payload };
        // The channel is alive: the token this target signed passes.
        let claims = check(&world, &world.token).expect("the signed token passes");
        assert_eq!(claims.sub, "fuzz-user");
        world
    })
}

/// What the verifier does once the key set is at hand.
fn check(world: &World, token: &str) -> Option<Claims> {
    let header = decode_header(token).ok()?;
    let keys: Vec<Arc<Key>> = world.keys.lookup(header.kid.as_deref())?;
    signed_claims(token, header.alg, &keys, &world.checks).ok()
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fuzz_target!(|input: &[u8]| {
    let world = world();
    let _ = KeySet::parse(input);
    if let Ok(text) = std::str::from_utf8(input) {
        assert!(
            check(world, text).is_none() || text == world.token,
            "arbitrary text passed: {text:?}"
        );
    }
    // The signed token with the input's edits (position, byte) applied.
    let mut edited = world.token.clone().into_bytes();
    for edit in input.chunks_exact(3) {
        let at = u16::from_le_bytes([edit[0], edit[1]]) as usize % edited.len();
        edited[at] = edit[2];
    }
    if let Ok(text) = std::str::from_utf8(&edited)
        && text != world.token
        && let Some(claims) = check(world, text)
    {
        assert_eq!(claims.sub, world.payload["sub"], "{text}");
        assert_eq!(claims.exp, world.payload["exp"], "{text}");
    }
    // A forged header over the real claims: the input picks the algorithm and key id and
    // is the signature, or the HMAC of the public key is.
    let algorithms = [
        "none", "HS256", "HS384", "RS256", "PS256", "ES384", "EdDSA", "ES256",
    ];
    let alg = algorithms[input.first().copied().unwrap_or(0) as usize % algorithms.len()];
    let kid = match input.get(1).copied().unwrap_or(0) % 3 {
        0 => serde_json::json!("k1"),
        1 => serde_json::json!("other"),
        _ => serde_json::Value::Null,
    };
    let header = b64(serde_json::json!({"alg": alg, "typ": "JWT", "kid": kid})
        .to_string()
        .as_bytes());
    let body = b64(world.payload.to_string().as_bytes());
    let signing_input = format!("{header}.{body}");
    let hmac_with_public_key = aws_lc_rs::hmac::sign(
        &aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, format!("{X}{Y}").as_bytes()),
        signing_input.as_bytes(),
    );
    for signature in [
        b64(input.get(2..).unwrap_or_default()),
        b64(hmac_with_public_key.as_ref()),
        String::new(),
    ] {
        let forged = format!("{signing_input}.{signature}");
        assert!(
            check(world, &forged).is_none(),
            "a forged token passed: {forged}"
        );
    }
});
