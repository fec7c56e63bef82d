//! `system_metrics`: CPU, memory, load and the workspace filesystem's space, read from the
//! kernel, every value clamped into its range.

use std::time::Duration;

use serde_json::json;

use super::{Context, Failure, Output, ToolResult};
use crate::sandbox::problem::Problem;

fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let idle = fields.get(3)? + fields.get(4).unwrap_or(&0);
    Some((fields.iter().sum(), idle))
}

fn meminfo(key: &str, text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kib| kib * 1024)
}

pub fn system_metrics(context: &Context<'_>) -> ToolResult {
    let before = cpu_times();
    std::thread::sleep(Duration::from_millis(100));
    let after = cpu_times();
    let cpu = match (before, after) {
        (Some((t0, i0)), Some((t1, i1))) if t1 > t0 => {
            let busy = (t1 - t0).saturating_sub(i1.saturating_sub(i0));
            (busy as f64 * 100.0 / (t1 - t0) as f64).clamp(0.0, 100.0)
        }
        _ => 0.0,
    };
    let memory = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let total = meminfo("MemTotal:", &memory).unwrap_or(0);
    let available = meminfo("MemAvailable:", &memory).unwrap_or(0).min(total);
    let load: Vec<f64> = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse::<f64>().ok())
        .map(|v| v.clamp(0.0, 1e6))
        .collect();
    let disk = rustix::fs::fstatvfs(context.workspace.root_fd()).map_err(|e| {
        Failure::new(
            Problem::Internal,
            format!("cannot read the filesystem's size: {e}"),
            "nothing to do",
        )
    })?;
    let block = disk.f_frsize.max(1);
    let disk_total = disk.f_blocks.saturating_mul(block);
    let disk_free = disk.f_bavail.saturating_mul(block).min(disk_total);
    let structured = json!({
        "cpu_percent": (cpu * 10.0).round() / 10.0,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "memory": {"total_bytes": total, "available_bytes": available, "used_percent": if total > 0 { ((total - available) as f64 * 1000.0 / total as f64).round() / 10.0 } else { 0.0 }},
        "load": load,
        "disk": {"total_bytes": disk_total, "available_bytes": disk_free, "used_percent": if disk_total > 0 { ((disk_total - disk_free) as f64 * 1000.0 / disk_total as f64).round() / 10.0 } else { 0.0 }},
    });
    Ok(Output {
        text: serde_json::to_string_pretty(&structured).expect("JSON serializes"),
        structured,
        untrusted: None,
    })
}
