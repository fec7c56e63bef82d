//! The OS keyring for real: a Secret Service (gnome-keyring) on a private session bus.
//! Ignored by default; `scripts/keyring-test` starts the bus and an unlocked keyring and
//! runs it (CI does, through `scripts/test-all`).

use crate::common::binary;
use mcp_stdio::oauth::store::backend::{Choice, TokenStore};
use mcp_stdio::oauth::store::file::FileStore;
use mcp_stdio::oauth::store::{Document, Grant};
use mcp_stdio::secret::Secret;

fn run(args: &[&str], state: &std::path::Path) -> (i32, String, String) {
    let output = std::process::Command::new(binary())
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env("HOME", state)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs an unlocked Secret Service: run scripts/keyring-test"]
fn the_secret_service_stores_reads_and_deletes_logins() {
    let home = tempfile::tempdir().unwrap();
    let file = || FileStore::new(home.path().join("mcp-stdio").join("tokens.json"));
    let store = TokenStore::open(Choice::Keyring, file()).expect("a usable Secret Service");
    let mut document = Document::default();
    document.grants.insert(
        "https://keyring.example/mcp".into(),
        Grant {
            access_token: Secret::new("keyring-at-secret"),
            token_type: "Bearer".into(),
            expires_at: None,
            refresh_token: Some(Secret::new("keyring-rt-secret")),
            scope: Some("read".into()),
            issuer: "https://as.keyring.example".into(),
            token_endpoint: "https://as.keyring.example/token".into(),
            client_id: "c".into(),
            resource: None,
            revocation_endpoint: None,
            dpop_key: None,
        },
    );
    store.save(&document).unwrap();
    assert!(
        !home.path().join("mcp-stdio").join("tokens.json").exists(),
        "not in the file"
    );
    assert_eq!(
        TokenStore::open(Choice::Keyring, file())
            .unwrap()
            .load()
            .unwrap(),
        document
    );

    // The binary finds it there too, and says where it is, without the token.
    let (code, stdout, _) = run(&["status", "--token-store", "keyring"], home.path());
    assert_eq!(code, 0);
    assert!(
        stdout.contains("https://keyring.example/mcp") && stdout.contains("keyring"),
        "{stdout}"
    );
    assert!(!stdout.contains("keyring-at-secret"));
    let (code, _, stderr) = run(&["status", "--json"], home.path());
    assert_eq!(code, 0, "auto finds the keyring: {stderr}");

    let (code, _, stderr) = run(
        &["logout", "--all", "--token-store", "keyring"],
        home.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    let after = TokenStore::open(Choice::Keyring, file())
        .unwrap()
        .load()
        .unwrap();
    assert_eq!(after, Document::default(), "deleted from the keyring");
}
