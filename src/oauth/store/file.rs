//! The token file: the fallback when no OS keyring is usable, and the store the tests use.
//!
//! `$XDG_STATE_HOME/mcp-stdio/tokens.json` (else `~/.local/state/mcp-stdio/tokens.json`),
//! in a 0700 directory, mode 0600. It is opened without following symlinks, refused when
//! anyone but the owner could read it (as ssh refuses keys), and replaced atomically:
//! a new file is written beside it, synced, then renamed over it, so a crash leaves the old
//! or the new contents, never half of either.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::Document;

pub struct FileStore {
    path: PathBuf,
    /// The Python mcp-stdio's token file, imported when ours does not exist yet.
    import_from: Option<PathBuf>,
}

impl FileStore {
    pub fn new(path: PathBuf) -> Self {
        FileStore {
            path,
            import_from: None,
        }
    }

    /// On first use (no token file yet), take over the Python tool's logins from `python`.
    pub fn importing(mut self, python: Option<PathBuf>) -> Self {
        self.import_from = python;
        self
    }

    /// Where the Python mcp-stdio keeps its tokens: `~/.config/mcp-stdio/tokens.json`
    /// (its path ignores XDG_CONFIG_HOME).
    pub fn python_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
        let home = env("HOME").filter(|h| !h.is_empty())?;
        Some(
            PathBuf::from(home)
                .join(".config")
                .join("mcp-stdio")
                .join("tokens.json"),
        )
    }

    /// The default location, from `XDG_STATE_HOME` or `HOME` as `env` reports them.
    pub fn default_path(env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
        let base = match env("XDG_STATE_HOME").filter(|v| Path::new(v).is_absolute()) {
            Some(state) => PathBuf::from(state),
            None => {
                let home = env("HOME")
                    .filter(|v| !v.is_empty())
                    .ok_or("cannot place the token file: neither XDG_STATE_HOME nor HOME is set")?;
                PathBuf::from(home).join(".local").join("state")
            }
        };
        Ok(base.join("mcp-stdio").join("tokens.json"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the store; a missing file is an empty store.
    pub fn load(&self) -> Result<Document, String> {
        let shown = self.path.display();
        let mut file = match open_no_follow(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(self.first_use()),
            Err(e) if is_symlink_refusal(&e) => {
                return Err(format!(
                    "the token file {shown} is a symbolic link, which is refused; replace it with a regular file or remove it"
                ));
            }
            Err(e) => return Err(format!("cannot open the token file {shown}: {e}")),
        };
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot inspect the token file {shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("the token file {shown} is not a regular file"));
        }
        if let Some(mode) = loose_mode(&meta) {
            return Err(format!(
                "the token file {shown} can be read by other users (mode {mode:o}); run `chmod 600 {shown}` and try again"
            ));
        }
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
        if text.trim().is_empty() {
            return Ok(Document::default());
        }
        serde_json::from_str(&text).map_err(|e| {
            format!("the token file {shown} is damaged ({e}); remove it and log in again")
        })
    }

    /// An empty store, or the Python tool's logins, saved as ours so this happens once.
    fn first_use(&self) -> Document {
        let Some(python) = &self.import_from else {
            return Document::default();
        };
        match super::python::import(python) {
            Ok(Some(document)) if !document.grants.is_empty() => {
                if let Err(e) = self.save(&document) {
                    tracing::warn!("{e}");
                }
                tracing::info!(
                    logins = document.grants.len(),
                    from = %python.display(),
                    "took over the logins of the Python mcp-stdio"
                );
                document
            }
            Ok(_) => Document::default(),
            Err(e) => {
                tracing::warn!("{e}; its logins were not taken over");
                Document::default()
            }
        }
    }

    /// Replaces the store with `document`, atomically.
    pub fn save(&self, document: &Document) -> Result<(), String> {
        let shown = self.path.display();
        let dir = self
            .path
            .parent()
            .ok_or_else(|| format!("the token file {shown} has no directory"))?;
        create_private_dir(dir)
            .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))?;
        let temp = dir.join(format!(
            ".tokens.json.{}.{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        let written = (|| -> std::io::Result<()> {
            let mut file = create_private_file(&temp)?;
            let json = serde_json::to_vec_pretty(document).map_err(std::io::Error::other)?;
            file.write_all(&json)?;
            file.sync_all()?;
            fs::rename(&temp, &self.path)?;
            // Make the rename itself durable.
            File::open(dir)?.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(format!("cannot write the token file {shown}: {e}"));
        }
        Ok(())
    }
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    if fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::other("symbolic link"));
    }
    File::open(path)
}

/// ELOOP is what `O_NOFOLLOW` gives for a symlink.
fn is_symlink_refusal(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
    }
    #[cfg(not(unix))]
    {
        e.to_string() == "symbolic link"
    }
}

/// The mode, when group or others have any access to the file.
#[cfg(unix)]
fn loose_mode(meta: &fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn loose_mode(_meta: &fs::Metadata) -> Option<u32> {
    None
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    // An existing directory that others can enter is tightened, not trusted as is.
    let mode = fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::super::{Grant, Registration};
    use super::*;
    use crate::secret::Secret;

    fn document() -> Document {
        let mut doc = Document::default();
        doc.grants.insert(
            "https://example.com/mcp".into(),
            Grant {
                access_token: Secret::new("at"),
                token_type: "Bearer".into(),
                expires_at: Some(1_900_000_000),
                refresh_token: Some(Secret::new("rt")),
                scope: Some("a b".into()),
                issuer: "https://as.example.com".into(),
                token_endpoint: "https://as.example.com/token".into(),
                client_id: "client-1".into(),
                resource: Some("https://example.com/mcp".into()),
                revocation_endpoint: None,
                dpop_key: None,
            },
        );
        doc.registrations.insert(
            "https://as.example.com".into(),
            Registration {
                client_id: "client-1".into(),
                client_secret: None,
                client_secret_expires_at: None,
                token_endpoint_auth_method: "none".into(),
                redirect_uri: Some("http://127.0.0.1:5000/callback".into()),
            },
        );
        doc
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn saves_privately_and_reads_back() {
        let home = tempfile::tempdir().unwrap();
        let path = home
            .path()
            .join("state")
            .join("mcp-stdio")
            .join("tokens.json");
        let store = FileStore::new(path.clone());
        assert_eq!(
            store.load().unwrap(),
            Document::default(),
            "missing means empty"
        );
        store.save(&document()).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(store.load().unwrap(), document());
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            leftovers,
            ["tokens.json"],
            "no temporary file is left behind"
        );
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("tokens.json");
        let store = FileStore::new(path.clone());
        store.save(&document()).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let e = store.load().unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
        assert!(!e.contains("\"at\""), "{e}");
    }

    #[test]
    fn a_symlink_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let real = home.path().join("elsewhere.json");
        FileStore::new(real.clone()).save(&document()).unwrap();
        let link = home.path().join("tokens.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = FileStore::new(link).load().unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn saving_replaces_a_symlink_instead_of_writing_through_it() {
        let home = tempfile::tempdir().unwrap();
        let target = home.path().join("victim");
        fs::write(&target, "untouched").unwrap();
        let link = home.path().join("tokens.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        FileStore::new(link.clone()).save(&document()).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "untouched");
        assert!(
            !fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn the_default_path_follows_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            FileStore::default_path(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/s/mcp-stdio/tokens.json")
        );
        assert_eq!(
            FileStore::default_path(env(&[("XDG_STATE_HOME", "relative"), ("HOME", "/h")]))
                .unwrap(),
            PathBuf::from("/h/.local/state/mcp-stdio/tokens.json")
        );
        assert!(FileStore::default_path(env(&[])).is_err());
    }
}
