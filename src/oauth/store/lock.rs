//! One refresh or login per server across processes: an advisory lock on a file per server
//! key, beside the token file. The OS releases it when the holder exits, even by a crash,
//! so a dead process never blocks the others.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// Held while one process refreshes or logs in for a server; released on drop.
pub struct ServerLock {
    _file: File,
}

impl ServerLock {
    /// Waits up to `patience` for the lock of `key`, polling (a login in another process can
    /// take as long as the user needs). `None` when the wait ran out: the caller goes ahead
    /// unserialized rather than failing the user's request.
    pub async fn acquire(
        dir: &Path,
        key: &str,
        patience: Duration,
    ) -> Result<Option<Self>, String> {
        let locks = dir.join("locks");
        std::fs::create_dir_all(&locks)
            .map_err(|e| format!("cannot create {}: {e}", locks.display()))?;
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
        let name = ::hex::encode(&digest.as_ref()[..8]);
        let path = locks.join(format!("{name}.lock"));
        let file =
            open_lock_file(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Some(ServerLock { _file: file })),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < patience => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(format!("cannot lock {}: {e}", path.display()));
                }
            }
        }
    }
}

#[cfg(unix)]
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

#[cfg(not(unix))]
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = ServerLock::acquire(dir.path(), "https://h/mcp", Duration::ZERO)
            .await
            .unwrap();
        assert!(first.is_some());
        let second = ServerLock::acquire(dir.path(), "https://h/mcp", Duration::from_millis(120))
            .await
            .unwrap();
        assert!(second.is_none(), "held by the first");
        let other = ServerLock::acquire(dir.path(), "https://other/mcp", Duration::ZERO)
            .await
            .unwrap();
        assert!(other.is_some(), "another server has its own lock");
        drop(first);
        let third = ServerLock::acquire(dir.path(), "https://h/mcp", Duration::ZERO)
            .await
            .unwrap();
        assert!(third.is_some());
    }
}
