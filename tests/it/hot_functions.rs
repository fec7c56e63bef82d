//! `link/relay-hot-functions.txt`, the functions `link/hot-first` puts at the start of the
//! release executable so that a relay keeps little of it resident, must still name this code:
//! a list gone stale (functions renamed, moved, or no longer generic over the same types)
//! silently loses what it saves. This test reads the symbols of the test build's binary (not
//! inlined, so every function of the release build is there by the same name) and fails when
//! too many of the list's functions no longer exist; `scripts/bench/hot-functions` rewrites it.
//! Only where the list is used: x86_64 Linux GNU, whose builds have v0 symbol names.
#![cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]

use std::collections::HashSet;
use std::io::Write;
use std::process::{Command, Stdio};

/// The share of the list that must still exist. Measured at 0.96 when the list was written;
/// each point below is about 15 functions of the relay's path left where the linker puts them.
const MINIMUM_SHARE: f64 = 0.9;

fn hot_list() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/link/relay-hot-functions.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Every function of the binary as link/hot-first keys it: demangled, without crate hashes.
fn function_keys(binary: &str) -> HashSet<String> {
    let nm = Command::new("nm")
        .args(["--defined-only", binary])
        .output()
        .expect("this test needs binutils' nm and c++filt (Debian: binutils)");
    assert!(nm.status.success(), "nm failed on {binary}");
    let mangled: String = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() >= 3 && matches!(fields[1], "t" | "T" | "w" | "W")).then(|| {
                let name = fields[2];
                let name = name.split(".llvm.").next().unwrap_or(name);
                format!("{name}\n")
            })
        })
        .collect();
    let mut filt = Command::new("c++filt")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("this test needs binutils' c++filt");
    let mut stdin = filt.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(mangled.as_bytes()).unwrap());
    let out = filt.wait_with_output().unwrap();
    writer.join().unwrap();
    let hash = regex::Regex::new(r"\[[0-9a-f]{5,16}\]").unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| hash.replace_all(line, "").into_owned())
        .collect()
}

#[test]
fn the_list_still_names_this_code() {
    let list = hot_list();
    assert!(list.len() > 500, "the list holds {} functions", list.len());
    let present = function_keys(crate::common::binary());
    // The channel is alive: the binary's own entry points are found by the same keys.
    assert!(
        present.contains("mcp_stdio::cli::main"),
        "the keys of this binary are not what link/hot-first computes (is it built with -C symbol-mangling-version=v0?)"
    );
    let missing: Vec<&String> = list.iter().filter(|key| !present.contains(*key)).collect();
    let share = 1.0 - missing.len() as f64 / list.len() as f64;
    assert!(
        share >= MINIMUM_SHARE,
        "{} of the {} functions in link/relay-hot-functions.txt no longer exist ({:.0} % left, {:.0} % needed); run scripts/bench/hot-functions. The first: {:#?}",
        missing.len(),
        list.len(),
        share * 100.0,
        MINIMUM_SHARE * 100.0,
        &missing[..missing.len().min(10)]
    );
}
