//! Where tokens live (`--token-store auto|keyring|file`): the OS keyring when one is usable,
//! the 0600 file otherwise. `auto` falls back to the file when the keyring cannot be
//! opened, refuses access, or accepts reads but refuses writes, and then stays with the
//! file for as long as it holds the logins, so nothing is split between the two.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Document;
use super::file::FileStore;
use super::keyring::{KeyringError, KeyringStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Keyring,
    File,
}

pub struct TokenStore {
    file: FileStore,
    keyring: Option<KeyringStore>,
    strict: bool,
    /// Set once `auto` has fallen back to the file.
    on_file: AtomicBool,
}

impl TokenStore {
    /// Opens the store `choice` names. Only `keyring` can fail: it names no fallback.
    pub fn open(choice: Choice, file: FileStore) -> Result<Self, String> {
        Self::open_with_patience(choice, file, super::keyring::DEFAULT_PATIENCE)
    }

    /// [`TokenStore::open`] with each keyring call bounded by `patience`
    /// (`--keyring-timeout`).
    pub fn open_with_patience(
        choice: Choice,
        file: FileStore,
        patience: std::time::Duration,
    ) -> Result<Self, String> {
        let keyring = match choice {
            Choice::File => None,
            Choice::Keyring => Some(KeyringStore::os_store(patience).map_err(|e| {
                format!("--token-store keyring: {e}; use --token-store file (or auto, which falls back to it), or a longer --keyring-timeout")
            })?),
            Choice::Auto => match KeyringStore::os_store(patience) {
                Ok(keyring) => Some(keyring),
                Err(e) => {
                    tracing::debug!("no usable keyring ({e}); tokens go to the file");
                    None
                }
            },
        };
        Ok(Self::with(file, keyring, choice == Choice::Keyring))
    }

    /// A store over the given parts (tests pass a mock keyring).
    pub fn with(file: FileStore, keyring: Option<KeyringStore>, strict: bool) -> Self {
        TokenStore {
            file,
            keyring,
            strict,
            on_file: AtomicBool::new(false),
        }
    }

    fn keyring(&self) -> Option<&KeyringStore> {
        self.keyring
            .as_ref()
            .filter(|_| !self.on_file.load(Ordering::Relaxed))
    }

    pub fn load(&self) -> Result<Document, String> {
        let Some(keyring) = self.keyring() else {
            return self.file.load();
        };
        match keyring.load() {
            Ok(document) if has_content(&document) || self.strict => Ok(document),
            // An empty keyring: the logins may be in the file (an earlier fallback, or the
            // Python tool's, imported there).
            Ok(empty) => {
                let on_file = self.file.load()?;
                if has_content(&on_file) {
                    self.on_file.store(true, Ordering::Relaxed);
                    Ok(on_file)
                } else {
                    Ok(empty)
                }
            }
            Err(e) => self.fall_back(e).and_then(|()| self.file.load()),
        }
    }

    pub fn save(&self, document: &Document) -> Result<(), String> {
        let Some(keyring) = self.keyring() else {
            return self.file.save(document);
        };
        match keyring.save(document) {
            Ok(()) => Ok(()),
            Err(e) => self.fall_back(e).and_then(|()| self.file.save(document)),
        }
    }

    fn fall_back(&self, e: KeyringError) -> Result<(), String> {
        if self.strict {
            return Err(format!("{e}; use --token-store file (or auto)"));
        }
        tracing::warn!(
            "{e}; keeping tokens in {} instead",
            self.file.path().display()
        );
        self.on_file.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Forgets everything (`logout --all`): the keyring entry is deleted, the file emptied.
    pub fn clear(&self) -> Result<(), String> {
        if let Some(keyring) = self.keyring() {
            keyring.delete().map_err(|e| e.to_string())?;
        }
        if self.file.path().exists() {
            self.file.save(&Document::default())?;
        }
        Ok(())
    }

    /// Where locks live: beside the token file, whichever backend holds the tokens.
    pub fn lock_dir(&self) -> Option<&Path> {
        self.file.path().parent()
    }

    /// For `status` and notices: which backend holds the tokens now.
    pub fn describe(&self) -> String {
        match self.keyring() {
            Some(_) => KeyringStore::name().into(),
            None => format!("file {}", self.file.path().display()),
        }
    }
}

fn has_content(document: &Document) -> bool {
    !document.grants.is_empty()
        || !document.registrations.is_empty()
        || !document.idp_logins.is_empty()
}

#[cfg(all(test, unix))]
mod tests {
    use std::sync::Arc;

    use keyring_core::Error;
    use keyring_core::mock;

    use super::super::Registration;
    use super::*;

    fn document() -> Document {
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
        document
    }

    #[test]
    fn auto_uses_the_keyring_when_it_works() {
        let dir = tempfile::tempdir().unwrap();
        let file = FileStore::new(dir.path().join("tokens.json"));
        let keyring = KeyringStore::new(
            mock::Store::new().unwrap(),
            std::time::Duration::from_secs(5),
        );
        let store = TokenStore::with(file, Some(keyring.clone()), false);
        store.save(&document()).unwrap();
        assert_eq!(keyring.load().unwrap(), document());
        assert!(!dir.path().join("tokens.json").exists(), "nothing on disk");
        assert_eq!(store.describe(), KeyringStore::name());
    }

    #[test]
    fn auto_falls_back_to_the_file_when_writes_are_refused_and_stays_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let mock_store = mock::Store::new().unwrap();
        let keyring = KeyringStore::new(mock_store.clone(), std::time::Duration::from_secs(5));
        // Reads work (an empty keyring), writes are refused: a locked Secret Service.
        let entry = keyring_core::Entry::new_in_store(
            &(mock_store.clone() as Arc<keyring_core::CredentialStore>),
            "mcp-stdio",
            "oauth-tokens",
        )
        .unwrap();
        let credential: &mock::Cred = entry.as_any().downcast_ref().unwrap();
        credential.set_error(Error::NoStorageAccess(Box::new(std::io::Error::other(
            "locked",
        ))));
        let store = TokenStore::with(FileStore::new(path.clone()), Some(keyring.clone()), false);
        store.save(&document()).unwrap();
        assert!(path.exists(), "saved to the file instead");
        // A new process: the keyring reads empty, the file has the logins, and wins.
        let again = TokenStore::with(FileStore::new(path), Some(keyring), false);
        assert_eq!(again.load().unwrap(), document());
        assert!(again.describe().starts_with("file "));
    }
}
