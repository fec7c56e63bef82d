//! Where audit lines go: a file (appended, owner-only, rotated by size with a bound on the
//! files kept), stdout or stderr. One thread of its own writes them, so a slow disk never
//! holds an async worker; it flushes whenever no line is waiting.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::Stats;
use super::record::Record;

/// A batch smaller than this waits `GATHER_FOR` for more before it is written.
const GATHER_BELOW: usize = 64;
const GATHER_FOR: std::time::Duration = std::time::Duration::from_millis(5);
/// Only a queue this long gathers: a short one (`--audit-queue`) would fill while the
/// writer waits.
const GATHER_QUEUE: usize = 1024;

/// Where the lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Appended to `path`; past `max_bytes` it becomes `path.1` (the older ones shift up to
    /// `path.KEEP`, the oldest removed).
    File {
        path: PathBuf,
        max_bytes: u64,
        keep: usize,
    },
    Stdout,
    Stderr,
}

/// An open audit file and how much it holds.
struct Current {
    out: BufWriter<File>,
    size: u64,
}

fn open(path: &Path) -> std::io::Result<Current> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    // A file made earlier by someone else keeps no wider permissions than ours.
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    let size = file.metadata()?.len();
    Ok(Current {
        out: BufWriter::new(file),
        size,
    })
}

/// `path.N`.
fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Shifts `path` to `path.1` (and each older file one up, the one past `keep` removed).
fn rotate(path: &Path, keep: usize) -> std::io::Result<()> {
    if keep == 0 {
        return std::fs::remove_file(path);
    }
    let _ = std::fs::remove_file(numbered(path, keep));
    for n in (1..keep).rev() {
        let from = numbered(path, n);
        if from.exists() {
            std::fs::rename(&from, numbered(path, n + 1))?;
        }
    }
    std::fs::rename(path, numbered(path, 1))
}

/// Checks that the file can be opened (at start: a path that cannot be written is a
/// usage error, not lines lost later).
pub fn check(sink: &Sink) -> Result<(), String> {
    match sink {
        Sink::File { path, .. } => open(path).map(|_| ()).map_err(|e| {
            format!(
                "--audit-log {}: cannot open it for appending: {e}",
                path.display()
            )
        }),
        Sink::Stdout | Sink::Stderr => Ok(()),
    }
}

/// Writes every line `lines` brings until every sender is gone.
pub fn run(sink: Sink, mut lines: mpsc::Receiver<Record>, stats: Arc<Stats>) {
    let mut file = None;
    while let Some(record) = lines.blocking_recv() {
        let mut batch = vec![record];
        while let Ok(more) = lines.try_recv() {
            batch.push(more);
        }
        // A few lines at a time, each its own write and wake-up, would cost every request
        // a system call or two: while the writer keeps up easily it lets lines gather for
        // a moment (they are in the queue, their places taken, so nothing is lost by it).
        if batch.len() < GATHER_BELOW && lines.max_capacity() >= GATHER_QUEUE {
            std::thread::sleep(GATHER_FOR);
            while let Ok(more) = lines.try_recv() {
                batch.push(more);
            }
        }
        let mut written = Ok(());
        let mut text = Vec::new();
        for record in &batch {
            text.clear();
            serde_json::to_writer(&mut text, record).expect("JSON serializes");
            text.push(b'\n');
            written = written.and_then(|()| match &sink {
                Sink::Stdout => std::io::stdout().lock().write_all(&text),
                Sink::Stderr => std::io::stderr().lock().write_all(&text),
                Sink::File {
                    path,
                    max_bytes,
                    keep,
                } => to_file(&mut file, path, *max_bytes, *keep, &text),
            });
        }
        // One flush per batch: the lines are out before the writer waits again.
        if let Some(current) = file.as_mut() {
            written = written.and_then(|()| current.out.flush());
        }
        match written {
            Ok(()) => {
                stats
                    .written
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                stats.lost.fetch_add(batch.len() as u64, Ordering::Relaxed);
                tracing::error!(lines = batch.len(), "cannot write the audit log: {e}");
                file = None;
            }
        }
    }
    if let Some(mut current) = file {
        let _ = current.out.flush();
    }
}

fn to_file(
    file: &mut Option<Current>,
    path: &Path,
    max_bytes: u64,
    keep: usize,
    text: &[u8],
) -> std::io::Result<()> {
    if file.is_none() {
        *file = Some(open(path)?);
    }
    let current = file.as_mut().expect("opened above");
    if current.size > 0 && current.size + text.len() as u64 > max_bytes {
        current.out.flush()?;
        *file = None;
        rotate(path, keep)?;
        *file = Some(open(path)?);
    }
    let current = file.as_mut().expect("opened above");
    current.out.write_all(text)?;
    current.size += text.len() as u64;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_at_most_keep_older_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut file = None;
        for n in 0..10 {
            to_file(
                &mut file,
                &path,
                20,
                2,
                format!("line {n:02} of ten\n").as_bytes(),
            )
            .unwrap();
        }
        file.as_mut().unwrap().out.flush().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["audit.log", "audit.log.1", "audit.log.2"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "line 09 of ten\n");
        assert_eq!(
            std::fs::read_to_string(numbered(&path, 2)).unwrap(),
            "line 07 of ten\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
