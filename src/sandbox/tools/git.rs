//! `git_log` and `git_diff`: read-only git in the workspace root, with every transport
//! disabled (`protocol.allow=never`), no pager, no hooks, no external diff or textconv
//! helpers, bounded output, and the denylisted files excluded by pathspec.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{Context, Failure, Output, ToolResult, bool_arg, string_arg, u64_arg};
use crate::sandbox::problem::Problem;

/// The `git` command line every call starts from.
fn git(context: &Context<'_>) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(context.workspace.host_root())
        .args([
            "-c",
            "protocol.allow=never",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "diff.external=",
            "-c",
            "core.pager=cat",
            "--no-pager",
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs git, keeping at most `cap` bytes of its output, within the call's deadline (and
/// stopping when the call is cancelled).
fn run(mut command: Command, cap: u64, context: &Context<'_>) -> Result<(String, bool), Failure> {
    let mut child = command.spawn().map_err(|e| {
        Failure::new(
            Problem::Internal,
            format!("git could not be started: {e}"),
            "git must be installed for the git tools",
        )
    })?;
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = stdout.take(cap + 1).read_to_end(&mut out);
        (out, read.is_ok())
    });
    let status = loop {
        if reader.is_finished() {
            // All output read (or the cap reached): git is done, or must stop.
            break child.try_wait().ok().flatten();
        }
        if let Some(stop) = context.stop() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(stop);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let (mut out, read_ok) = reader.join().unwrap_or_default();
    let truncated = out.len() as u64 > cap;
    out.truncate(cap as usize);
    let status = match status {
        Some(status) => Some(status),
        None if truncated => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
        None => child.wait().ok(),
    };
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    if !read_ok || (!truncated && !status.is_some_and(|s| s.success())) {
        let first = err.lines().next().unwrap_or("git failed").to_owned();
        return Err(Failure::new(
            Problem::Validation,
            format!("git: {first}"),
            "the workspace must be a git repository; check the revision or path",
        ));
    }
    Ok((String::from_utf8_lossy(&out).into_owned(), truncated))
}

/// A path argument, checked like any other read, as a git pathspec.
fn pathspec(arguments: &Value, context: &Context<'_>) -> Result<Option<String>, Failure> {
    let Some(requested) = string_arg(arguments, "path") else {
        return Ok(None);
    };
    let opened = context
        .workspace
        .open_beneath(requested, rustix::fs::OFlags::PATH)
        .map_err(|r| Failure::refused(&r, context.workspace))?;
    Ok(Some(if opened.path.is_empty() {
        ".".into()
    } else {
        opened.path
    }))
}

fn excludes(context: &Context<'_>) -> Vec<String> {
    context
        .workspace
        .deny
        .patterns()
        .iter()
        .map(|p| format!(":(exclude,glob,icase){p}"))
        .collect()
}

pub fn git_log(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let count = u64_arg(arguments, "max_count").unwrap_or(20);
    let mut command = git(context);
    command.args([
        "log",
        &format!("--max-count={count}"),
        "--format=%H%x1f%an%x1f%aI%x1f%s%x1e",
        "--",
    ]);
    if let Some(path) = pathspec(arguments, context)? {
        command.arg(path);
    }
    let (out, truncated) = run(command, context.limits.max_read_bytes, context)?;
    let commits: Vec<Value> = out
        .split('\u{1e}')
        .filter_map(|record| {
            let fields: Vec<&str> = record.trim().split('\u{1f}').collect();
            (fields.len() == 4).then(|| json!({"commit": fields[0], "author": fields[1], "date": fields[2], "subject": fields[3]}))
        })
        .collect();
    let text = commits
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                &c["commit"].as_str().unwrap_or_default()
                    [..12.min(c["commit"].as_str().unwrap_or_default().len())],
                c["date"].as_str().unwrap_or_default(),
                c["subject"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Output {
        text,
        structured: json!({"commits": commits, "truncated": truncated}),
        untrusted: Some("git log".into()),
    })
}

pub fn git_diff(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let mut command = git(context);
    command.args(["diff", "--no-ext-diff", "--no-textconv", "--no-color"]);
    if bool_arg(arguments, "staged") {
        command.arg("--cached");
    }
    if let Some(revision) = string_arg(arguments, "revision") {
        let safe = !revision.starts_with('-')
            && revision
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._/~^-@{}".contains(c));
        if !safe {
            return Err(Failure::new(
                Problem::Validation,
                format!("'{revision}' is not a revision name"),
                "give a commit, branch or tag, e.g. HEAD~1",
            )
            .on("revision"));
        }
        command.arg(revision);
    }
    command.arg("--");
    command.arg(pathspec(arguments, context)?.unwrap_or_else(|| ".".into()));
    command.args(excludes(context));
    let (diff, truncated) = run(command, context.limits.max_read_bytes, context)?;
    Ok(Output {
        text: diff.clone(),
        structured: json!({"diff": diff, "truncated": truncated}),
        untrusted: Some("git diff".into()),
    })
}
