//! Diagnostics go to stderr, never stdout: in relay mode stdout is the protocol wire.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogLevel {
    fn directive(self) -> &'static str {
        match self {
            LogLevel::Off => "off",
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// Installs the stderr subscriber. Our own events follow `level`; dependencies are held at
/// `warn`, because HTTP libraries at debug/trace would print request headers, which carry
/// credentials.
pub fn init(level: LogLevel, format: LogFormat) {
    let ours = level.directive();
    let theirs = if level == LogLevel::Off {
        "off"
    } else {
        "warn"
    };
    let filter = EnvFilter::new(format!("{theirs},mcp_stdio={ours}"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

/// A message for the person at the terminal (the login URL, a device code), written to
/// stderr whatever the log level: it is an instruction, not a diagnostic.
#[allow(clippy::print_stderr)]
pub fn notice(message: &str) {
    eprintln!("mcp-stdio: {message}");
}
