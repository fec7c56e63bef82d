//! The `mcp-stdio` binary: everything lives in the library; this only hands over the exit code.
#![deny(clippy::print_stdout, clippy::print_stderr)]

fn main() {
    std::process::exit(mcp_stdio::cli::main());
}
