//! `read_file` and `file_info`.

use std::io::{Read, Seek, SeekFrom};

use serde_json::{Value, json};

use super::{Context, Failure, Output, ToolResult, hex, sha256, string_arg, u64_arg};
use crate::sandbox::problem::Problem;
use crate::sandbox::workspace::kind_name;

pub fn read_file(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let workspace = context.workspace;
    let requested = string_arg(arguments, "path").unwrap_or_default();
    let (mut file, opened) = workspace
        .open_file(requested)
        .map_err(|r| Failure::refused(&r, workspace))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let cap = u64_arg(arguments, "max_bytes")
        .unwrap_or(context.limits.max_read_bytes)
        .min(context.limits.max_read_bytes);
    let offset = u64_arg(arguments, "offset").unwrap_or(0).min(size);
    file.seek(SeekFrom::Start(offset)).map_err(|e| {
        Failure::new(
            Problem::Internal,
            format!("cannot read '{}': {e}", opened.path),
            "try again",
        )
    })?;
    let mut bytes = Vec::with_capacity(cap.min(size.saturating_sub(offset)) as usize);
    file.take(cap).read_to_end(&mut bytes).map_err(|e| {
        Failure::new(
            Problem::Internal,
            format!("cannot read '{}': {e}", opened.path),
            "try again",
        )
    })?;
    let end = offset + bytes.len() as u64;
    let truncated = end < size;
    let digest = sha256(&bytes);
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(Failure::new(
            Problem::Unsupported,
            format!("'{}' is not UTF-8 text", opened.path),
            "use file_info for its size and sha256; binary content is not returned",
        ));
    };
    let (text, lines) = match (
        u64_arg(arguments, "start_line"),
        u64_arg(arguments, "end_line"),
    ) {
        (None, None) => (text, None),
        (start, stop) => {
            let start = start.unwrap_or(1).max(1) as usize;
            let stop = stop.unwrap_or(u64::MAX).max(start as u64) as usize;
            let selected: Vec<&str> = text
                .split_inclusive('\n')
                .skip(start - 1)
                .take(stop - start + 1)
                .collect();
            (
                selected.concat(),
                Some(json!([start, start + selected.len().saturating_sub(1)])),
            )
        }
    };
    let mut receipt = json!({
        "path": opened.path,
        "sha256": digest,
        "bytes_read": end - offset,
        "offset": offset,
        "size": size,
        "truncated": truncated,
    });
    if truncated {
        receipt["next_offset"] = end.into();
    }
    if let Some(lines) = lines {
        receipt["lines"] = lines;
    }
    if let Some(revision) = context.revision {
        receipt["git_revision"] = revision.into();
    }
    Ok(Output {
        structured: json!({"path": opened.path, "content": text, "receipt": receipt}),
        untrusted: Some(opened.path),
        text,
    })
}

pub fn file_info(arguments: &Value, context: &Context<'_>) -> ToolResult {
    let workspace = context.workspace;
    let requested = string_arg(arguments, "path").unwrap_or_default();
    // O_PATH: stat anything (a FIFO included) without opening it for reading.
    let opened = workspace
        .open_beneath(requested, rustix::fs::OFlags::PATH)
        .map_err(|r| Failure::refused(&r, workspace))?;
    let stat = rustix::fs::fstat(&opened.fd).map_err(|e| {
        Failure::new(
            Problem::Internal,
            format!("cannot stat '{}': {e}", opened.path),
            "try again",
        )
    })?;
    let mut info = json!({
        "path": opened.path,
        "type": kind_name(opened.kind),
        "size": stat.st_size,
        "modified": stat.st_mtime,
    });
    if opened.kind == rustix::fs::FileType::RegularFile {
        if (stat.st_size as u64) <= context.limits.max_hash_bytes {
            let (mut file, _) = workspace
                .open_file(requested)
                .map_err(|r| Failure::refused(&r, workspace))?;
            let mut hasher = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                if let Some(stop) = context.stop() {
                    return Err(stop);
                }
                let n = file.read(&mut buffer).map_err(|e| {
                    Failure::new(
                        Problem::Internal,
                        format!("cannot read '{}': {e}", opened.path),
                        "try again",
                    )
                })?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
            }
            info["sha256"] = hex(hasher.finish().as_ref()).into();
        } else {
            info["sha256_skipped"] = "larger than --max-hash-bytes".into();
        }
    }
    Ok(Output {
        text: serde_json::to_string_pretty(&info).expect("JSON serializes"),
        structured: info,
        untrusted: None,
    })
}
