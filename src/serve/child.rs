//! One session's child: the stdio MCP server process, in a process group of its own. Its
//! stdin is fed by one writer task, its stdout read line by line, its stderr copied to ours
//! with the session's name on each line. Ending it closes stdin, then signals the group.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::jsonrpc::framing::{Frame, LineReader};

/// The stdio server to start: program and arguments, with what its environment adds and
/// the folder it starts in (from a config file's `env` and `cwd`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildCommand {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<std::path::PathBuf>,
    /// The config file's name for the server, on every line its children write to stderr.
    pub server: Option<String>,
    /// Variables of serve's environment the child must not inherit (a relay child must
    /// not send serve's own `MCP_BEARER_TOKEN` to a remote server).
    pub env_remove: Vec<String>,
}

impl ChildCommand {
    pub fn new(argv: Vec<String>) -> Self {
        ChildCommand {
            argv,
            ..ChildCommand::default()
        }
    }

    /// The program, for messages.
    pub fn program(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }
}

/// Where the command's program would be found: a path as given (from its `cwd` when
/// relative), or the first match on `PATH`.
pub fn find_program(command: &ChildCommand) -> Option<std::path::PathBuf> {
    let program = command.program();
    if program.is_empty() {
        return None;
    }
    if program.contains('/') || program.contains(std::path::MAIN_SEPARATOR) {
        let path = std::path::PathBuf::from(program);
        let path = match &command.cwd {
            Some(cwd) if path.is_relative() => cwd.join(path),
            _ => path,
        };
        return path.is_file().then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// What the child's stdout produced.
pub enum Output {
    Line(Bytes),
    /// A line over the size limit (skipped).
    TooLong,
}

pub struct Child {
    /// Lines for the child's stdin (without their newline). Bounded: a child that stops
    /// reading slows its session down instead of growing memory.
    pub stdin: mpsc::Sender<Bytes>,
    /// Closes the child's stdin even while senders remain (the session holds one).
    close_stdin: tokio_util::sync::CancellationToken,
    process: Box<dyn ChildWrapper>,
    /// The name its stderr lines carry: a spare's changes when a session adopts it.
    name: Arc<Mutex<String>>,
}

impl Child {
    /// Starts `command` (program and arguments) for session `name`. `output` receives the
    /// child's stdout lines; it closes when the child's stdout does.
    pub fn spawn(
        command: &ChildCommand,
        name: &str,
        max_line: usize,
        queue: usize,
        output: mpsc::Sender<Output>,
    ) -> std::io::Result<Self> {
        let (program, args) = command
            .argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command"))?;
        let mut wrap = CommandWrap::with_new(program, |c| {
            c.args(args).envs(command.env.iter().map(|(k, v)| (k, v)));
            for name in &command.env_remove {
                c.env_remove(name);
            }
            if let Some(cwd) = &command.cwd {
                c.current_dir(cwd);
            }
            c.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        });
        #[cfg(unix)]
        wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
        #[cfg(windows)]
        wrap.wrap(process_wrap::tokio::JobObject);
        wrap.wrap(KillOnDrop);
        let mut process = wrap.spawn()?;
        let mut stdin = process.stdin().take().expect("stdin is piped");
        let stdout = process.stdout().take().expect("stdout is piped");
        let stderr = process.stderr().take().expect("stderr is piped");

        let (stdin_tx, mut stdin_rx) = mpsc::channel::<Bytes>(queue);
        let close_stdin = tokio_util::sync::CancellationToken::new();
        let closing = close_stdin.clone();
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    line = stdin_rx.recv() => match line {
                        Some(line) => line,
                        None => break,
                    },
                    _ = closing.cancelled() => break,
                };
                let written = async {
                    stdin.write_all(&line).await?;
                    stdin.write_all(b"\n").await?;
                    stdin.flush().await
                };
                if written.await.is_err() {
                    break;
                }
            }
            // Dropping stdin closes the pipe: a well-behaved server exits.
        });

        tokio::spawn(async move {
            let mut reader = LineReader::new(stdout, max_line);
            while let Ok(Some(frame)) = reader.next().await {
                let item = match frame {
                    Frame::Line(line) => Output::Line(line),
                    Frame::TooLong => Output::TooLong,
                };
                if output.send(item).await.is_err() {
                    break;
                }
            }
        });

        let name = Arc::new(Mutex::new(name.to_owned()));
        let named = name.clone();
        let server = command.server.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let session = named.lock().expect("name lock").clone();
                match &server {
                    Some(server) => tracing::info!(%server, %session, "child: {line}"),
                    None => tracing::info!(%session, "child: {line}"),
                }
            }
        });

        Ok(Child {
            stdin: stdin_tx,
            close_stdin,
            process,
            name,
        })
    }

    /// Names the child after the session that adopted it (its stderr lines say so).
    pub fn rename(&self, name: &str) {
        *self.name.lock().expect("name lock") = name.to_owned();
    }

    /// Whether it has exited (without waiting).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.process.try_wait(), Ok(None))
    }

    pub fn id(&self) -> Option<u32> {
        self.process.id()
    }

    /// Waits for the child to exit on its own.
    pub async fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.wait().await.ok()
    }

    /// Ends the child and everything it started: stdin is closed (the caller drops its
    /// senders), then after `grace` SIGTERM to the group, then after `grace` SIGKILL; the
    /// child is always reaped.
    pub async fn terminate(mut self, grace: Duration) {
        self.close_stdin.cancel();
        let exited = tokio::time::timeout(grace, self.process.wait())
            .await
            .is_ok();
        #[cfg(unix)]
        {
            // The group outlives its leader when the server left processes behind (an
            // `npx` wrapper's node, a tool's helper): they get SIGTERM, then SIGKILL.
            let _ = self.process.signal(libc_sigterm());
            if !exited
                && tokio::time::timeout(grace, self.process.wait())
                    .await
                    .is_ok()
            {
                tokio::time::sleep(grace.min(Duration::from_millis(100))).await;
            }
        }
        let _ = self.process.start_kill();
        let _ = self.process.wait().await;
    }
}

#[cfg(unix)]
fn libc_sigterm() -> i32 {
    rustix::process::Signal::TERM.as_raw()
}
