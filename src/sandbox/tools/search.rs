//! `search_text`: the `regex` crate (finite automata: linear in the input, so no pattern can
//! backtrack catastrophically), over files opened beneath the root, bounded in files, bytes
//! and matches.

use std::io::Read;

use regex::{Regex, RegexBuilder};
use serde_json::{Value, json};

use super::{Context, Failure, Output, ToolResult, bool_arg, glob_arg, string_arg, u64_arg};
use crate::sandbox::problem::Problem;
use crate::sandbox::workspace::Workspace;

pub fn search_text(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let regex = pattern(arguments)?;
    let glob = glob_arg(arguments)?;
    let around = u64_arg(arguments, "context").unwrap_or(0) as usize;
    let start = string_arg(arguments, "path").unwrap_or(".");
    let (files, walk_cut) = files_beneath(start, glob.as_ref(), context)?;
    let found = search_files(files, &regex, around, context)?;
    let text = found
        .matches
        .iter()
        .map(|m| {
            format!(
                "{}:{}: {}",
                m["path"].as_str().unwrap_or_default(),
                m["line"],
                m["text"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let truncated = walk_cut || found.truncated;
    Ok(Output {
        text,
        structured: json!({"matches": found.matches, "files_searched": found.searched, "truncated": truncated}),
        untrusted: Some("search results".into()),
    })
}

/// The `pattern` argument as a regular expression (escaped with `literal`).
fn pattern(arguments: &Value) -> Result<Regex, Failure> {
    let pattern = string_arg(arguments, "pattern").unwrap_or_default();
    let source = if bool_arg(arguments, "literal") {
        regex::escape(pattern)
    } else {
        pattern.to_owned()
    };
    RegexBuilder::new(&source)
        .case_insensitive(bool_arg(arguments, "case_insensitive"))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            Failure::new(
                Problem::Validation,
                format!("the pattern is not a valid regular expression: {e}"),
                "fix the pattern, or pass literal: true to search for the text as it is",
            )
            .on("pattern")
        })
}

/// The files beneath `start` that `glob` takes, in name order, walked without following a
/// link out and without `.git`; true when `--max-files` cut the walk short.
fn files_beneath(
    start: &str,
    glob: Option<&globset::GlobMatcher>,
    context: &Context<'_>,
) -> Result<(Vec<String>, bool), Failure> {
    let workspace = context.workspace;
    let first = workspace
        .open_beneath(start, rustix::fs::OFlags::PATH)
        .map_err(|r| Failure::refused(&r, workspace))?;
    let mut files = Vec::new();
    let mut queue = vec![(first.path.clone(), first.kind)];
    while let Some((path, kind)) = queue.pop() {
        if let Some(stop) = context.stop() {
            return Err(stop);
        }
        if kind == rustix::fs::FileType::Directory {
            queue.extend(children(workspace, &path));
            continue;
        }
        if glob.is_some_and(|g| !g.is_match(&path)) {
            continue;
        }
        if files.len() >= context.limits.max_files {
            return Ok((files, true));
        }
        files.push(path);
    }
    Ok((files, false))
}

/// A folder's entries (not `.git`), last name first so the walk pops them in order.
fn children(workspace: &Workspace, path: &str) -> Vec<(String, rustix::fs::FileType)> {
    let Ok(opened) = workspace.open_dir(if path.is_empty() { "." } else { path }) else {
        return Vec::new();
    };
    let Ok(reader) = rustix::fs::Dir::read_from(&opened.fd) else {
        return Vec::new();
    };
    let mut children: Vec<(String, rustix::fs::FileType)> = reader
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name != "." && name != ".." && name != ".git").then(|| {
                (
                    if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}/{name}")
                    },
                    e.file_type(),
                )
            })
        })
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    children.reverse();
    children
}

/// What the search found: the matches (each with `around` lines of context), how many
/// files were read, and whether `--max-matches` cut it short.
struct Found {
    matches: Vec<Value>,
    searched: usize,
    truncated: bool,
}

fn search_files(
    files: Vec<String>,
    regex: &Regex,
    around: usize,
    context: &Context<'_>,
) -> Result<Found, Failure> {
    let mut found = Found {
        matches: Vec::new(),
        searched: 0,
        truncated: false,
    };
    for path in files {
        if let Some(stop) = context.stop() {
            return Err(stop);
        }
        // Opened beneath the root like any read: a symlink out, a denied file, a FIFO or
        // a device is skipped, never followed or read.
        let Ok((file, opened)) = context.workspace.open_file(&path) else {
            continue;
        };
        let mut bytes = Vec::new();
        if file
            .take(context.limits.max_read_bytes)
            .read_to_end(&mut bytes)
            .is_err()
        {
            continue;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        found.searched += 1;
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            if found.matches.len() >= context.limits.max_matches {
                found.truncated = true;
                return Ok(found);
            }
            let from = i.saturating_sub(around);
            let to = (i + around + 1).min(lines.len());
            found.matches.push(json!({
                "path": opened.path,
                "line": i + 1,
                "text": line,
                "context": lines[from..to].join("\n"),
            }));
        }
    }
    Ok(found)
}
