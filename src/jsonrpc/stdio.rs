//! The process's stdin and stdout as async handles, polled on the runtime's own thread
//! when they are pipes or sockets (what every host gives us), on a helper thread otherwise.
//!
//! Why: handing each line between a reader thread, the runtime and a writer thread costs
//! three futex wake-ups per call, more CPU than relaying the call itself. A pipe or socket
//! can be made non-blocking and registered with the runtime's poller instead. Regular files
//! and terminals cannot (epoll refuses files, and a terminal is shared with the shell that
//! started us), so they keep the thread.
//!
//! O_NONBLOCK belongs to the open file description, which other processes may share, so
//! [`StdioModes`] puts the original flags back when the relay ends, and a descriptor that
//! is the same file as stderr is never touched (logging would start failing with EAGAIN).

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};

/// Where stdout's lines go: a handle the runtime polls, or stdout written by blocking
/// writes on a thread of its own.
pub enum Output {
    Polled(Box<dyn AsyncWrite + Unpin + Send>),
    Threaded(std::io::Stdout),
}

/// Remembers the descriptors switched to non-blocking mode and restores them on drop.
#[derive(Default)]
pub struct StdioModes {
    #[cfg(unix)]
    restore: Vec<(std::os::fd::OwnedFd, rustix::fs::OFlags)>,
}

impl StdioModes {
    /// Stdin as an async reader, polled when possible. Must run inside the tokio runtime.
    pub fn input(&mut self) -> Box<dyn AsyncRead + Unpin + Send> {
        #[cfg(unix)]
        if let Some(reader) = self.polled(std::io::stdin(), Direction::Read, Polled::reader) {
            return reader;
        }
        Box::new(threaded_stdin())
    }

    /// Stdout as a polled handle when possible. Must run inside the tokio runtime.
    pub fn output(&mut self) -> Output {
        #[cfg(unix)]
        if let Some(writer) = self.polled(std::io::stdout(), Direction::Write, Polled::writer) {
            return Output::Polled(writer);
        }
        Output::Threaded(std::io::stdout())
    }
}

/// Reads stdin on a dedicated OS thread with plain blocking reads and hands the chunks to
/// async code (tokio's own stdin would take a blocking-pool thread for every read).
fn threaded_stdin() -> impl AsyncRead + Unpin + Send {
    use futures_util::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(16);
    let spawned = std::thread::Builder::new()
        .name("stdin-reader".into())
        .spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx
                            .blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
                            .is_err()
                        {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        break;
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader thread: {e}");
    }
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    tokio_util::io::StreamReader::new(chunks.boxed())
}

#[cfg(unix)]
mod polled {
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

    use rustix::fs::{FileType, OFlags, fcntl_getfl, fcntl_setfl, fstat};
    use tokio::io::{AsyncRead, AsyncWrite};

    use super::StdioModes;

    pub(super) enum Direction {
        Read,
        Write,
    }

    /// A duplicate of stdin or stdout, already non-blocking, ready to register.
    pub(super) enum Polled {
        Pipe(OwnedFd),
        Socket(OwnedFd),
    }

    impl StdioModes {
        /// Switches a duplicate of `fd` to non-blocking mode and hands it to `register`;
        /// `None` (with the mode put back) when `fd` cannot or must not be polled.
        pub(super) fn polled<T>(
            &mut self,
            fd: impl AsFd,
            direction: Direction,
            register: impl FnOnce(Polled) -> std::io::Result<T>,
        ) -> Option<T> {
            let fd = fd.as_fd();
            let kind = FileType::from_raw_mode(fstat(fd).ok()?.st_mode);
            if !matches!(kind, FileType::Fifo | FileType::Socket) || shares_stderr(fd) {
                return None;
            }
            let flags = fcntl_getfl(fd).ok()?;
            let access = flags & OFlags::RWMODE;
            let usable = match direction {
                Direction::Read => access != OFlags::WRONLY,
                Direction::Write => access != OFlags::RDONLY,
            };
            if !usable {
                return None;
            }
            let duplicate = fd.try_clone_to_owned().ok()?;
            let keeper = fd.try_clone_to_owned().ok()?;
            if !flags.contains(OFlags::NONBLOCK) {
                fcntl_setfl(&duplicate, flags | OFlags::NONBLOCK).ok()?;
            }
            let polled = match kind {
                FileType::Fifo => Polled::Pipe(duplicate),
                _ => Polled::Socket(duplicate),
            };
            match register(polled) {
                Ok(handle) => {
                    self.restore.push((keeper, flags));
                    Some(handle)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "cannot poll a standard stream; using a thread");
                    let _ = fcntl_setfl(&keeper, flags);
                    None
                }
            }
        }
    }

    impl Drop for StdioModes {
        fn drop(&mut self) {
            for (fd, flags) in self.restore.drain(..) {
                let _ = fcntl_setfl(&fd, flags);
            }
        }
    }

    /// Whether `fd` is the same file as stderr (`2>&1`, or one socket for all three).
    fn shares_stderr(fd: BorrowedFd<'_>) -> bool {
        let (Ok(ours), Ok(stderr)) = (fstat(fd), fstat(std::io::stderr())) else {
            return true;
        };
        ours.st_dev == stderr.st_dev && ours.st_ino == stderr.st_ino
    }

    impl Polled {
        pub(super) fn reader(self) -> std::io::Result<Box<dyn AsyncRead + Unpin + Send>> {
            Ok(match self {
                Polled::Pipe(fd) => Box::new(
                    tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd)?,
                ),
                Polled::Socket(fd) => Box::new(socket(fd)?),
            })
        }

        pub(super) fn writer(self) -> std::io::Result<Box<dyn AsyncWrite + Unpin + Send>> {
            Ok(match self {
                Polled::Pipe(fd) => {
                    Box::new(tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(fd)?)
                }
                Polled::Socket(fd) => Box::new(socket(fd)?),
            })
        }
    }

    /// Any stream socket (a host's socketpair, or inetd's TCP socket) reads and writes
    /// like a Unix stream.
    fn socket(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
        tokio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
    }
}

#[cfg(unix)]
use polled::{Direction, Polled};
