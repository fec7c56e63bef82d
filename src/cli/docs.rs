//! `completions` and `manpage`: the shell completion scripts and the roff man page,
//! generated from the same clap definitions the program parses with, so they never drift.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory, ValueEnum};

use super::{Cli, EXIT_USAGE, report_usage_error};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for, e.g. `mcp-stdio completions bash > ~/.local/share/bash-completion/completions/mcp-stdio`.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Write `mcp-stdio.1` and one `mcp-stdio-COMMAND.1` per subcommand into this folder
    /// instead of printing `mcp-stdio.1` to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs) -> i32 {
    let mut command = Cli::command();
    let mut out = Vec::new();
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
        Shell::Powershell => clap_complete::Shell::PowerShell,
    };
    clap_complete::generate(shell, &mut command, "mcp-stdio", &mut out);
    print(&out)
}

pub fn manpage(args: ManpageArgs) -> i32 {
    let command = Cli::command();
    let Some(dir) = args.dir else {
        return match render(command) {
            Ok(page) => print(&page),
            Err(e) => failed(&format!("cannot render the man page: {e}")),
        };
    };
    if !dir.is_dir() {
        report_usage_error(&format!(
            "--dir {}: not a folder; create it first, or leave --dir out to print mcp-stdio.1 to stdout",
            dir.display()
        ));
        return EXIT_USAGE;
    }
    let mut pages = vec![("mcp-stdio.1".to_owned(), command.clone())];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("mcp-stdio-{}", sub.get_name());
        let sub = sub.clone().name(name.clone()).bin_name(name.clone());
        pages.push((format!("{name}.1"), sub));
    }
    for (file, command) in pages {
        let path = dir.join(&file);
        let written = render(command).and_then(|page| std::fs::write(&path, page));
        if let Err(e) = written {
            return failed(&format!("cannot write {}: {e}", path.display()));
        }
    }
    0
}

fn render(command: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    Ok(page)
}

#[allow(clippy::print_stderr)] // a terminal command's one-line failure
fn failed(message: &str) -> i32 {
    eprintln!("mcp-stdio: error: {message}");
    1
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a message.
fn print(bytes: &[u8]) -> i32 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => failed(&format!("cannot write to stdout: {e}")),
    }
}
