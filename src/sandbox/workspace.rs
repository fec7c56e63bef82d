//! The boundary: every path a tool touches is opened beneath the root, never by name from
//! outside it. On Linux `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` resolves inside the
//! kernel (symlinks that stay inside are followed, ones that leave fail with EXDEV whether or
//! not their target exists); elsewhere, or where openat2 is missing, a component walk with
//! `O_NOFOLLOW` refuses every symlink. The denylist is matched against the path the open
//! actually reached, read back from the descriptor.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::denylist::Denylist;

/// Longest relative path accepted (bytes).
const MAX_PATH: usize = 4096;

/// Why a path was refused; each says what would work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Outside(String),
    Denied { path: String, rule: String },
    NotFound(String),
    NotRegular { path: String, kind: &'static str },
    NotDirectory(String),
    Invalid(String),
    NoAccess(String),
}

impl Refusal {
    /// One sentence for the model: what happened.
    pub fn message(&self) -> String {
        match self {
            Refusal::Outside(p) => format!("'{p}' is outside the workspace"),
            Refusal::Denied { path, rule } => {
                format!("'{path}' is on the denylist ({rule}): it may hold credentials")
            }
            Refusal::NotFound(p) => format!("'{p}' does not exist in the workspace"),
            Refusal::NotRegular { path, kind } => {
                format!("'{path}' is a {kind}, not a regular file")
            }
            Refusal::NotDirectory(p) => format!("'{p}' is not a directory"),
            Refusal::Invalid(why) => why.clone(),
            Refusal::NoAccess(p) => format!("'{p}' cannot be read (permission denied)"),
        }
    }

    /// What would work instead.
    pub fn remedy(&self, root: &str) -> String {
        match self {
            Refusal::Outside(_) => format!("paths must stay inside the workspace root '{root}/': give a relative path without '..' that leaves it, and no symlink that points out of it"),
            Refusal::Denied { .. } => "files that may hold secrets are not served; ask the user to share what you need from it".into(),
            Refusal::NotFound(_) => "list the directory with list_directory to see what exists".into(),
            Refusal::NotRegular { .. } => "only regular files can be read; use list_directory for directories".into(),
            Refusal::NotDirectory(_) => "use read_file or file_info for files".into(),
            Refusal::Invalid(_) => "give a relative path inside the workspace, e.g. 'src/main.rs'".into(),
            Refusal::NoAccess(_) => "the server process cannot read it; nothing to do from here".into(),
        }
    }
}

pub struct Workspace {
    root: OwnedFd,
    /// The root's real path, to turn what an open reached back into a relative path.
    real_root: PathBuf,
    /// How the root is named to clients: its last component only, never a host path.
    pub name: String,
    pub deny: Denylist,
    use_openat2: bool,
}

/// A file or directory opened inside the workspace.
pub struct Opened {
    pub fd: OwnedFd,
    /// The path relative to the root that the open reached (after symlinks inside).
    pub path: String,
    pub kind: FileType,
}

impl Workspace {
    pub fn open(root: &Path, deny: Denylist) -> std::io::Result<Self> {
        let real_root = std::fs::canonicalize(root)?;
        let fd = rustix::fs::open(
            &real_root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let name = real_root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workspace".into());
        #[cfg(target_os = "linux")]
        let use_openat2 = !matches!(
            rustix::fs::openat2(
                &fd,
                ".",
                OFlags::PATH | OFlags::CLOEXEC,
                Mode::empty(),
                rustix::fs::ResolveFlags::BENEATH,
            ),
            Err(Errno::NOSYS)
        );
        #[cfg(not(target_os = "linux"))]
        let use_openat2 = false;
        Ok(Workspace {
            root: fd,
            real_root,
            name,
            deny,
            use_openat2,
        })
    }

    /// Opens `requested` (relative to the root) for reading: a regular file, checked.
    pub fn open_file(&self, requested: &str) -> Result<(File, Opened), Refusal> {
        let opened = self.open_beneath(requested, OFlags::RDONLY | OFlags::NONBLOCK)?;
        match opened.kind {
            FileType::RegularFile => {}
            FileType::Directory => {
                return Err(Refusal::NotRegular {
                    path: opened.path,
                    kind: "directory",
                });
            }
            other => {
                return Err(Refusal::NotRegular {
                    path: opened.path,
                    kind: kind_name(other),
                });
            }
        }
        let fd = rustix::io::dup(&opened.fd).map_err(|_| Refusal::NoAccess(opened.path.clone()))?;
        Ok((File::from(fd), opened))
    }

    /// Opens `requested` as a directory.
    pub fn open_dir(&self, requested: &str) -> Result<Opened, Refusal> {
        let opened = self.open_beneath(requested, OFlags::RDONLY | OFlags::DIRECTORY)?;
        Ok(opened)
    }

    /// Opens without following anything out of the root; checks the denylist against the
    /// path reached.
    pub fn open_beneath(&self, requested: &str, flags: OFlags) -> Result<Opened, Refusal> {
        let relative = check_request(requested)?;
        // openat2 refuses O_NOCTTY (and most flags) next to O_PATH with EINVAL.
        let flags = if flags.contains(OFlags::PATH) {
            flags | OFlags::CLOEXEC
        } else {
            flags | OFlags::CLOEXEC | OFlags::NOCTTY
        };
        let fd = if self.use_openat2 {
            self.openat2(&relative, flags, requested)?
        } else {
            self.walk(&relative, flags, requested)?
        };
        let path = self.relative_of(&fd).unwrap_or_else(|| relative.clone());
        if let Some(rule) = self.deny.matches(&path) {
            return Err(Refusal::Denied { path, rule });
        }
        let stat = rustix::fs::fstat(&fd).map_err(|_| Refusal::NoAccess(path.clone()))?;
        Ok(Opened {
            fd,
            path,
            kind: FileType::from_raw_mode(stat.st_mode),
        })
    }

    #[cfg(target_os = "linux")]
    fn openat2(&self, relative: &str, flags: OFlags, requested: &str) -> Result<OwnedFd, Refusal> {
        use rustix::fs::ResolveFlags;
        let target = if relative.is_empty() { "." } else { relative };
        rustix::fs::openat2(
            &self.root,
            target,
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| refusal_of(e, requested))
    }

    #[cfg(not(target_os = "linux"))]
    fn openat2(&self, relative: &str, flags: OFlags, requested: &str) -> Result<OwnedFd, Refusal> {
        self.walk(relative, flags, requested)
    }

    /// The fallback: one component at a time, never following a symlink.
    fn walk(&self, relative: &str, flags: OFlags, requested: &str) -> Result<OwnedFd, Refusal> {
        let mut current =
            rustix::io::dup(&self.root).map_err(|_| Refusal::NoAccess(requested.into()))?;
        let parts: Vec<&str> = relative
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if parts.contains(&"..") {
            return Err(Refusal::Outside(requested.into()));
        }
        if parts.is_empty() {
            return rustix::fs::openat(&current, ".", flags, Mode::empty())
                .map_err(|e| refusal_of(e, requested));
        }
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let step_flags = if last {
                flags | OFlags::NOFOLLOW
            } else {
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
            };
            current = rustix::fs::openat(&current, *part, step_flags, Mode::empty()).map_err(
                |e| match e {
                    // A symlink where a component was expected: not followed by this fallback.
                    Errno::LOOP | Errno::NOTDIR => Refusal::Outside(requested.into()),
                    other => refusal_of(other, requested),
                },
            )?;
        }
        Ok(current)
    }

    /// The path an open reached, relative to the root (Linux: read back from /proc).
    fn relative_of(&self, fd: &OwnedFd) -> Option<String> {
        let link = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())
        ))
        .ok()?;
        let relative = link.strip_prefix(&self.real_root).ok()?;
        Some(relative.to_string_lossy().into_owned())
    }

    pub fn root_fd(&self) -> &OwnedFd {
        &self.root
    }

    /// The root's real path, for running tools (git) in it; never shown to clients.
    pub fn host_root(&self) -> &Path {
        &self.real_root
    }
}

/// The request itself: relative, no NUL, not too long.
fn check_request(requested: &str) -> Result<String, Refusal> {
    if requested.contains('\0') {
        return Err(Refusal::Invalid("the path contains a NUL byte".into()));
    }
    if requested.len() > MAX_PATH {
        return Err(Refusal::Invalid(format!(
            "the path is longer than {MAX_PATH} bytes"
        )));
    }
    if requested.starts_with('/') || requested.starts_with('\\') || requested.contains(":\\") {
        return Err(Refusal::Outside(requested.into()));
    }
    let trimmed = requested.trim_start_matches("./");
    Ok(if trimmed == "." {
        String::new()
    } else {
        trimmed.to_owned()
    })
}

fn refusal_of(e: Errno, requested: &str) -> Refusal {
    match e {
        // EXDEV: resolution would leave the root. ELOOP: a magic link, or a symlink loop.
        Errno::XDEV | Errno::LOOP => Refusal::Outside(requested.into()),
        Errno::NOENT => Refusal::NotFound(requested.into()),
        Errno::NOTDIR => Refusal::NotDirectory(requested.into()),
        Errno::ACCESS | Errno::PERM => Refusal::NoAccess(requested.into()),
        Errno::NAMETOOLONG => Refusal::Invalid("the path is too long".into()),
        _ => Refusal::NoAccess(requested.into()),
    }
}

pub fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "special file",
    }
}
