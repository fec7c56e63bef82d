//! The OS credential store through keyring-core (Secret Service on Linux, the login
//! Keychain on macOS, Credential Manager on Windows): the whole token document as one
//! secret, `mcp-stdio` / `oauth-tokens`.
//!
//! Keyring calls block (D-Bus, and on a desktop maybe an unlock prompt), so each runs on a
//! helper thread and is given up after a bound: a stuck keyring must not hang the relay.

use std::sync::Arc;
use std::time::Duration;

use keyring_core::{CredentialStore, Entry, Error};

use super::Document;

const SERVICE: &str = "mcp-stdio";
const ACCOUNT: &str = "oauth-tokens";
/// How long one keyring call may take unless `--keyring-timeout` says otherwise.
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(10);

/// Why the keyring could not be used.
#[derive(Debug)]
pub enum KeyringError {
    /// The keyring refuses access (locked, no collection, writes refused): use the file.
    NoAccess(String),
    /// Anything else (a damaged entry, D-Bus failures, a call that never returned).
    Failed(String),
}

impl std::fmt::Display for KeyringError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyringError::NoAccess(e) | KeyringError::Failed(e) => f.write_str(e),
        }
    }
}

#[derive(Clone)]
pub struct KeyringStore {
    store: Arc<CredentialStore>,
    /// How long one call may take before the keyring counts as unusable.
    patience: Duration,
}

impl KeyringStore {
    pub fn new(store: Arc<CredentialStore>, patience: Duration) -> Self {
        KeyringStore { store, patience }
    }

    /// The platform's credential store; each call on it may take up to `patience`.
    pub fn os_store(patience: Duration) -> Result<Self, KeyringError> {
        Self::platform(patience)
    }

    /// Which store [`KeyringStore::os_store`] is, for `status` and the logs.
    pub fn name() -> &'static str {
        if cfg!(target_os = "linux") {
            "the OS keyring (Secret Service)"
        } else if cfg!(target_os = "macos") {
            "the macOS login Keychain"
        } else if cfg!(target_os = "windows") {
            "the Windows Credential Manager"
        } else {
            "the OS keyring"
        }
    }

    /// The desktop's Secret Service (GNOME Keyring, KWallet). Fails fast where there is no
    /// session bus (servers, containers, CI).
    #[cfg(target_os = "linux")]
    fn platform(patience: Duration) -> Result<Self, KeyringError> {
        // Without a session bus there is no Secret Service; saying so without starting
        // zbus saves a thread and a megabyte on every headless start.
        if !session_bus_present() {
            return Err(KeyringError::NoAccess("no D-Bus session bus".into()));
        }
        bounded_for(patience, zbus_secret_service_keyring_store::Store::new)
            .and_then(|r| r.map_err(classify))
            .map(|store| KeyringStore::new(store, patience))
    }

    /// The user's login Keychain (the "legacy keychain" store: the one an unsigned
    /// command-line program may use). Not build-checked on the Linux machines this project
    /// is developed and tested on.
    #[cfg(target_os = "macos")]
    fn platform(patience: Duration) -> Result<Self, KeyringError> {
        bounded_for(patience, apple_native_keyring_store::keychain::Store::new)
            .and_then(|r| r.map_err(classify))
            .map(|store| KeyringStore::new(store, patience))
    }

    /// The Windows Credential Manager. Not build-checked on the Linux machines this
    /// project is developed and tested on.
    #[cfg(target_os = "windows")]
    fn platform(patience: Duration) -> Result<Self, KeyringError> {
        bounded_for(patience, windows_native_keyring_store::Store::new)
            .and_then(|r| r.map_err(classify))
            .map(|store| KeyringStore::new(store, patience))
    }

    #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
    fn platform(_patience: Duration) -> Result<Self, KeyringError> {
        Err(KeyringError::NoAccess(
            "no OS keyring is supported on this platform".into(),
        ))
    }

    /// The document; an absent entry is an empty store.
    pub fn load(&self) -> Result<Document, KeyringError> {
        let store = self.store.clone();
        let secret = bounded_for(self.patience, move || {
            Entry::new_in_store(&store, SERVICE, ACCOUNT)?.get_secret()
        })?;
        match secret {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                KeyringError::Failed(format!("the keyring's token entry is damaged ({e})"))
            }),
            Err(Error::NoEntry) => Ok(Document::default()),
            Err(e) => Err(classify(e)),
        }
    }

    pub fn save(&self, document: &Document) -> Result<(), KeyringError> {
        let json = serde_json::to_vec(document).expect("a document serializes");
        let store = self.store.clone();
        bounded_for(self.patience, move || {
            Entry::new_in_store(&store, SERVICE, ACCOUNT)?.set_secret(&json)
        })?
        .map_err(classify)
    }
}

impl KeyringStore {
    /// Removes the entry (`logout --all` on the keyring). An absent entry is fine.
    pub fn delete(&self) -> Result<(), KeyringError> {
        let store = self.store.clone();
        match bounded_for(self.patience, move || {
            Entry::new_in_store(&store, SERVICE, ACCOUNT)?.delete_credential()
        })? {
            Ok(()) | Err(Error::NoEntry) => Ok(()),
            Err(e) => Err(classify(e)),
        }
    }
}

/// Whether a D-Bus session bus can exist: an address in the environment, or the usual
/// socket in the user's runtime directory.
#[cfg(target_os = "linux")]
fn session_bus_present() -> bool {
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty()) {
        return true;
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| format!("/run/user/{}", rustix::process::getuid().as_raw()).into());
    runtime.join("bus").exists()
}

fn classify(e: Error) -> KeyringError {
    match e {
        Error::NoStorageAccess(_) => {
            KeyringError::NoAccess(format!("the keyring refuses access ({e})"))
        }
        other => KeyringError::Failed(format!("the keyring failed ({other})")),
    }
}

/// Runs a blocking keyring call on its own thread, for at most `patience`.
fn bounded_for<T: Send + 'static>(
    patience: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<T, KeyringError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("keyring".into())
        .spawn(move || {
            let _ = tx.send(call());
        })
        .map_err(|e| KeyringError::Failed(format!("cannot start a keyring call ({e})")))?;
    rx.recv_timeout(patience).map_err(|_| {
        KeyringError::NoAccess(format!(
            "the keyring did not answer within {} s (locked, or waiting for a prompt)",
            patience.as_secs_f64()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::store::Registration;

    #[test]
    fn a_keyring_call_that_hangs_is_given_up() {
        let outcome = bounded_for(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_millis(500));
        });
        match outcome {
            Err(KeyringError::NoAccess(e)) => assert!(e.contains("did not answer"), "{e}"),
            _ => panic!("a hung keyring call must be abandoned"),
        }
        assert_eq!(bounded_for(Duration::from_secs(5), || 7).unwrap(), 7);
    }

    #[test]
    fn round_trips_through_a_keyring() {
        let keyring =
            KeyringStore::new(keyring_core::mock::Store::new().unwrap(), DEFAULT_PATIENCE);
        assert_eq!(keyring.load().unwrap(), Document::default());
        let mut document = Document::default();
        document.registrations.insert(
            "https://as".into(),
            Registration {
                client_id: "c".into(),
                client_secret: None,
                client_secret_expires_at: None,
                token_endpoint_auth_method: "none".into(),
                redirect_uri: None,
            },
        );
        keyring.save(&document).unwrap();
        assert_eq!(keyring.load().unwrap(), document);
    }
}
