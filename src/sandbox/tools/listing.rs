//! `list_directory`: a bounded, sorted walk that opens every directory beneath the root.

use serde_json::{Value, json};

use super::{Context, Failure, Output, ToolResult, glob_arg, string_arg, u64_arg};
use crate::sandbox::workspace::kind_name;

pub fn list_directory(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let workspace = context.workspace;
    let start = string_arg(arguments, "path").unwrap_or(".");
    let depth = u64_arg(arguments, "depth").unwrap_or(1) as usize;
    let glob = glob_arg(arguments)?;
    let first = workspace
        .open_dir(start)
        .map_err(|r| Failure::refused(&r, workspace))?;
    let mut entries = Vec::new();
    let mut truncated = false;
    let mut queue = vec![(first.path, 1usize)];
    while let Some((dir, level)) = queue.pop() {
        if let Some(stop) = context.stop() {
            return Err(stop);
        }
        let Ok(opened) = workspace.open_dir(if dir.is_empty() { "." } else { &dir }) else {
            continue; // denied, or swapped for something that leaves the root: skipped
        };
        let Ok(reader) = rustix::fs::Dir::read_from(&opened.fd) else {
            continue;
        };
        let mut names: Vec<(String, rustix::fs::FileType)> = reader
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name != "." && name != "..").then(|| (name, e.file_type()))
            })
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            if workspace.deny.matches(&path).is_some() {
                continue;
            }
            if kind == rustix::fs::FileType::Directory && level < depth {
                queue.push((path.clone(), level + 1));
            }
            if glob.as_ref().is_some_and(|g| !g.is_match(&path)) {
                continue;
            }
            if entries.len() >= context.limits.max_entries {
                truncated = true;
                break;
            }
            entries.push(json!({"path": path, "type": kind_name(kind)}));
        }
        if truncated {
            break;
        }
    }
    entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    let text = entries
        .iter()
        .map(|e| {
            format!(
                "{}{}",
                e["path"].as_str().unwrap_or_default(),
                if e["type"] == "directory" { "/" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Output {
        text: if truncated {
            format!("{text}\n… (truncated at --max-entries)")
        } else {
            text
        },
        structured: json!({"entries": entries, "truncated": truncated}),
        untrusted: None,
    })
}
