//! The proof's claims and signature, the RFC 9449 and RFC 7638 examples, the stored key,
//! and which answers ask for a nonce.

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::*;

fn part(jwt: &str, index: usize) -> Value {
    let text = jwt.split('.').nth(index).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).unwrap()).unwrap()
}

#[test]
fn a_proof_carries_every_claim_and_verifies_with_its_own_jwk() {
    let key = DpopKey::generate().unwrap();
    let url = url::Url::parse("https://mcp.example.com:8443/mcp?session=1#frag").unwrap();
    let proof = key
        .proof(
            "POST",
            &url,
            1_700_000_000,
            Some("an-access-token"),
            Some("n-1"),
        )
        .unwrap();
    let jwt = proof.expose();
    let header = part(jwt, 0);
    assert_eq!(header["typ"], "dpop+jwt");
    assert_eq!(header["alg"], "ES256");
    assert_eq!(header["jwk"], key.jwk());
    assert!(
        header["jwk"].get("d").is_none(),
        "no private part: {header}"
    );
    let claims = part(jwt, 1);
    assert_eq!(claims["htm"], "POST");
    assert_eq!(claims["htu"], "https://mcp.example.com:8443/mcp");
    assert_eq!(claims["iat"], 1_700_000_000);
    assert_eq!(claims["ath"], ath("an-access-token"));
    assert_eq!(claims["nonce"], "n-1");
    assert!(claims["jti"].as_str().unwrap().len() >= 16);
    // The signature verifies with the public key the header carries.
    let jwk = &header["jwk"];
    let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(jwk[name].as_str().unwrap()).unwrap();
    let mut point = vec![4u8];
    point.extend(coordinate("x"));
    point.extend(coordinate("y"));
    let (signing_input, signature) = jwt.rsplit_once('.').unwrap();
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(
            signing_input.as_bytes(),
            &URL_SAFE_NO_PAD.decode(signature).unwrap(),
        )
        .expect("a valid ES256 signature");
    // A token request's proof has no ath and, until asked, no nonce; every jti is new.
    let plain = key.proof("POST", &url, 1, None, None).unwrap();
    let again = key.proof("POST", &url, 1, None, None).unwrap();
    let (a, b) = (part(plain.expose(), 1), part(again.expose(), 1));
    assert!(a.get("ath").is_none() && a.get("nonce").is_none(), "{a}");
    assert_ne!(a["jti"], b["jti"]);
}

#[test]
fn the_thumbprint_and_ath_match_the_rfcs_examples() {
    // RFC 9449 §4.1's key and §6.1's `cnf.jkt` for it.
    assert_eq!(
        thumbprint_of(
            "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs",
            "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"
        ),
        "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
    );
    // RFC 9449 §7.1's access token and its proof's `ath`.
    assert_eq!(
        ath("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"),
        "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"
    );
    let key = DpopKey::generate().unwrap();
    let jwk = key.jwk();
    assert_eq!(
        key.thumbprint(),
        thumbprint_of(jwk["x"].as_str().unwrap(), jwk["y"].as_str().unwrap())
    );
}

#[test]
fn a_stored_key_is_the_same_key_and_never_shown() {
    let key = DpopKey::generate().unwrap();
    let stored = key.to_stored().unwrap();
    let again = DpopKey::from_stored(&stored).unwrap();
    assert_eq!(again.thumbprint(), key.thumbprint());
    let shown = format!("{key:?} {stored:?}");
    assert!(!shown.contains(stored.expose()), "{shown}");
    assert!(shown.contains(&key.thumbprint()));
    for damaged in ["not base64!", "AAAA"] {
        let why = DpopKey::from_stored(&Secret::new(damaged.to_owned())).unwrap_err();
        assert!(why.contains("log in again"), "{why}");
    }
}

#[test]
fn only_an_answer_that_asks_for_a_nonce_gives_one() {
    let with = |pairs: &[(&str, &str)]| {
        let mut headers = http::HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    };
    let nonce = [("dpop-nonce", "eyJ7S_zG.eyJH0-Z.HX4w-7v")];
    let asked = br#"{"error":"use_dpop_nonce","error_description":"Authorization server requires nonce in DPoP proof"}"#;
    assert_eq!(
        nonce_asked(400, &with(&nonce), asked).as_deref(),
        Some("eyJ7S_zG.eyJH0-Z.HX4w-7v")
    );
    assert_eq!(
        nonce_asked(400, &with(&nonce), br#"{"error":"invalid_grant"}"#),
        None
    );
    assert_eq!(nonce_asked(400, &with(&[]), asked), None, "no nonce to use");
    let challenged = with(&[
        nonce[0],
        (
            "www-authenticate",
            r#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#,
        ),
    ]);
    assert_eq!(
        nonce_asked(401, &challenged, b"").as_deref(),
        Some("eyJ7S_zG.eyJH0-Z.HX4w-7v")
    );
    let bearer = with(&[
        nonce[0],
        ("www-authenticate", r#"Bearer error="invalid_token""#),
    ]);
    assert_eq!(nonce_asked(401, &bearer, b""), None);
    assert_eq!(nonce_asked(500, &with(&nonce), asked), None);
    let long = "n".repeat(1025);
    for bad in ["two words", long.as_str()] {
        assert_eq!(nonce_offered(&with(&[("dpop-nonce", bad)])), None, "{bad}");
    }
    assert_eq!(nonce_offered(&with(&nonce)).as_deref(), Some(nonce[0].1));
}
