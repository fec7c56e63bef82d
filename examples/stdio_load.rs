//! A load driver for a stdio MCP server on its own (the baseline of `scripts/bench/serve-run`):
//! CALLS `echo` calls to warm it, the p50 of CALLS more one at a time, then calls/s with N in
//! flight, as a client keeps a gateway busy. Written in Rust so the driver is not what is
//! measured.
//!
//! `stdio_load CALLS IN_FLIGHT SECONDS ARGUMENT -- CMD ARGS…` prints
//! `{"p50_ms": …, "rps": …}` on stdout.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn call(id: u64, argument: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"{argument}\":\"x\"}}}}}}\n"
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args.iter().position(|a| a == "--").expect("-- CMD");
    let calls: usize = args[1].parse().expect("CALLS");
    let in_flight: u64 = args[2].parse().expect("IN_FLIGHT");
    let seconds: f64 = args[3].parse().expect("SECONDS");
    let argument = &args[4];
    let mut child = Command::new(&args[split + 1])
        .args(&args[split + 2..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the backend starts");
    let mut stdin = BufWriter::new(child.stdin.take().unwrap());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // Reads until an answer (a line with a result or an error); notifications are skipped.
    let mut answer = |stdout: &mut BufReader<_>| loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the backend closed its stdout"
        );
        if line.contains("\"result\"") || line.contains("\"error\"") {
            return;
        }
    };
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}
"#)
        .unwrap();
    stdin.flush().unwrap();
    answer(&mut stdout);
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();

    let mut id = 0;
    // As many calls unmeasured first: a JIT-compiled server (Node's) is slow while cold,
    // and a gateway's figures are taken from a warm one.
    for _ in 0..calls {
        id += 1;
        stdin.write_all(call(id, argument).as_bytes()).unwrap();
        stdin.flush().unwrap();
        answer(&mut stdout);
    }
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        id += 1;
        let start = Instant::now();
        stdin.write_all(call(id, argument).as_bytes()).unwrap();
        stdin.flush().unwrap();
        answer(&mut stdout);
        times.push(start.elapsed());
    }
    times.sort();
    let p50 = times[times.len() / 2];

    for _ in 0..in_flight {
        id += 1;
        stdin.write_all(call(id, argument).as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut answered = 0u64;
    loop {
        answer(&mut stdout);
        answered += 1;
        if Instant::now() >= deadline {
            break;
        }
        id += 1;
        stdin.write_all(call(id, argument).as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    let rps = answered as f64 / start.elapsed().as_secs_f64();
    println!(
        "{{\"p50_ms\": {:.4}, \"rps\": {rps:.0}}}",
        p50.as_secs_f64() * 1000.0
    );
    let _ = child.kill();
    let _ = child.wait();
}
