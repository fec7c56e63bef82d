//! The audit log's flags, the same for `serve` and the relay (`crate::audit::Settings`).

use clap::Args;

use crate::audit::{Settings, Sink, WhenFull};

#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// One JSON line per operation to this file (appended, owner-only, rotated by size),
    /// or `-` for stdout (serve only), `stderr` for stderr. docs/observability.md.
    #[arg(long, value_name = "PATH")]
    audit_log: Option<String>,

    /// Bytes of the audit file before it is rotated to PATH.1 (older ones shift up).
    #[arg(long, value_name = "BYTES", default_value = "104857600", value_parser = clap::value_parser!(u64).range(1024..))]
    audit_log_max_size: u64,

    /// Rotated audit files kept (PATH.1 … PATH.N); 0: none, the file starts over.
    #[arg(long, value_name = "N", default_value = "5", value_parser = clap::value_parser!(u64).range(0..=1000))]
    audit_log_keep: u64,

    /// Audit lines waiting for the writer, at most; past it --audit-when-full decides.
    #[arg(long, value_name = "N", default_value = "4096", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    audit_queue: u64,

    /// When the writer cannot keep up: `wait` (requests wait for room) or `refuse`
    /// (requests are refused at once); either way nothing runs unaudited and /metrics
    /// counts it.
    #[arg(long, value_enum, value_name = "MODE", default_value = "wait")]
    audit_when_full: WhenFullArg,

    /// Record the arguments' values too (redacted as the sandbox redacts); by default
    /// only their SHA-256 digest.
    #[arg(long)]
    audit_arguments: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum WhenFullArg {
    Wait,
    Refuse,
}

impl AuditArgs {
    /// The settings, if an audit log is asked for. `stdout_is_wire`: the relay's stdout
    /// carries the protocol, so its audit lines cannot go there.
    pub fn settings(&self, stdout_is_wire: bool) -> Result<Option<Settings>, String> {
        let Some(path) = &self.audit_log else {
            return Ok(None);
        };
        let sink = match path.as_str() {
            "-" if stdout_is_wire => {
                return Err("--audit-log -: the relay's stdout is the protocol; write the audit log to a file or to stderr (--audit-log stderr)".into());
            }
            "-" => Sink::Stdout,
            "stderr" => Sink::Stderr,
            "" => return Err("--audit-log needs a path, `-` or `stderr`".into()),
            path => Sink::File {
                path: path.into(),
                max_bytes: self.audit_log_max_size,
                keep: self.audit_log_keep as usize,
            },
        };
        Ok(Some(Settings {
            sink,
            queue: self.audit_queue as usize,
            when_full: match self.audit_when_full {
                WhenFullArg::Wait => WhenFull::Wait,
                WhenFullArg::Refuse => WhenFull::Refuse,
            },
            arguments: self.audit_arguments,
        }))
    }
}
