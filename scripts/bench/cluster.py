"""Benchmarks `mcp-stdio serve` as replicas: three replicas sharing a cluster key
behind Debian's nginx (deploy/nginx.conf.template, round-robin, no stickiness), fronting the
release build of examples/stdio_fixture.rs. Not a test: it reports figures.

Usage: scripts/bench/cluster-run [--seconds S] [--rounds N]

One handshake-era session lives on replica A. Measured, each phase with wrk (one thread, a
Lua script giving every request its own id), alternating over the rounds (medians):
  - straight to A (the owner): p50 with 1 connection, calls/s with 64;
  - straight to B, which forwards every request to A: the p50 forwarding adds;
  - through nginx over A, B and C (two requests in three forwarded): p50 and calls/s with 64,
    against the same load sent straight to A;
  - 2026-07-28 clients (no session, nothing forwarded) through nginx against straight to A.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import serve as bench  # scripts/bench/serve.py: wrk, sessions, the backend

ROOT = bench.ROOT
BINARY = Path(os.environ.get("MCP_STDIO_BENCH_BIN", str(ROOT / "target" / "release" / "mcp-stdio")))
KEY = "benchmark-cluster-key-of-more-than-thirty-two-bytes"


def cpu_ticks() -> dict[str, int]:
    """CPU time (clock ticks) so far of the processes a call passes through, by role."""
    # A process's name in /proc is its file's name, cut to 15 bytes (a baseline binary is
    # often not called mcp-stdio).
    roles = {BINARY.name[:15]: "replicas", "nginx": "nginx", "stdio_fixture": "backend"}
    totals: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        role = roles.get(name)
        if role:
            fields = stat[stat.rindex(")") + 2:].split()
            totals[role] = totals.get(role, 0) + int(fields[11]) + int(fields[12])
    return totals


def start_replica(key: Path, port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [str(BINARY), "serve", "--port", str(port), "--cluster-key-file", str(key), "--advertise-url",
         f"http://127.0.0.1:{port}", "--log-level", "off", "--max-requests-per-session", "256", "--",
         *bench.BACKEND],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
    )
    bench.wait_up(f"http://127.0.0.1:{port}/mcp", process)
    return process


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mcp-stdio-cluster-bench-"))
    key = work / "cluster.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    ports = [bench.free_port() for _ in range(3)]
    replicas = [start_replica(key, port) for port in ports]
    nginx_dir, nginx_port = work / "nginx", bench.free_port()
    # The same nginx with the owner as its only upstream: what nginx costs by itself.
    solo_dir, solo_port = work / "nginx-solo", bench.free_port()
    scripts = {}
    for name, text in (("legacy", bench.WRK_SCRIPT), ("modern", bench.MODERN_WRK_SCRIPT)):
        path = work / f"{name}.lua"
        path.write_text(text)
        scripts[name] = str(path)
    try:
        subprocess.run([str(ROOT / "scripts" / "nginx"), "start", str(nginx_dir), str(nginx_port), *map(str, ports)],
                       check=True)
        subprocess.run([str(ROOT / "scripts" / "nginx"), "start", str(solo_dir), str(solo_port), str(ports[0])],
                       check=True)
        solo = f"http://127.0.0.1:{solo_port}/mcp"
        owner = f"http://127.0.0.1:{ports[0]}/mcp"
        other = f"http://127.0.0.1:{ports[1]}/mcp"
        balanced = f"http://127.0.0.1:{nginx_port}/mcp"
        session = bench.open_session(owner)
        for url in (owner, balanced):
            bench.check_modern(url)
        runs: dict[str, list[dict]] = {}

        ticks = os.sysconf("SC_CLK_TCK")

        def run(label: str, url: str, connections: int, script: str, with_session: bool = True) -> None:
            before = cpu_ticks()
            result = bench.wrk(url, session if with_session else "", connections, args.seconds, script)
            after = cpu_ticks()
            if result["errors"]:
                raise RuntimeError(f"{label}: {result['errors']} requests failed")
            calls = result["rps"] * args.seconds
            result["cpu_us"] = {role: (after[role] - before.get(role, 0)) / ticks * 1e6 / calls for role in after}
            runs.setdefault(label, []).append(result)

        for _ in range(args.rounds):
            run("owner, 1", owner, 1, scripts["legacy"])
            run("forwarded, 1", other, 1, scripts["legacy"])
            run("nginx, 1", balanced, 1, scripts["legacy"])
            run("owner, 64", owner, 64, scripts["legacy"])
            run("nginx, 64", balanced, 64, scripts["legacy"])
            run("nginx to owner only, 64", solo, 64, scripts["legacy"])
            run("modern owner, 64", owner, 64, scripts["modern"], with_session=False)
            run("modern nginx, 64", balanced, 64, scripts["modern"], with_session=False)
            time.sleep(0.2)

        def med(label: str, field: str) -> float:
            return statistics.median(r[field] for r in runs[label])

        print(f"{args.rounds} rounds of {args.seconds} s per phase, medians; wrk, 1 thread\n")
        def cpu(label: str, role: str) -> float:
            return statistics.median(r["cpu_us"].get(role, 0.0) for r in runs[label])

        print(f"{'phase':<26}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}   CPU us per call: replicas, nginx, backend")
        for label in runs:
            print(f"{label:<26}{med(label, 'p50_ms'):>9.3f}{med(label, 'p99_ms'):>9.3f}{med(label, 'rps'):>10.0f}"
                  f"   {cpu(label, 'replicas'):6.1f} {cpu(label, 'nginx'):6.1f} {cpu(label, 'backend'):6.1f}")
        added = (med("forwarded, 1", "p50_ms") - med("owner, 1", "p50_ms")) * 1000
        print(f"\np50 added by forwarding (B to A): {added:.0f} us (target <= 200)")
        ratio = med("nginx, 64", "rps") / med("owner, 64", "rps")
        print(f"calls/s, 64 in flight, nginx over 3 replicas / straight to the owner: {ratio:.2f}x (target >= 0.8)")
        alone = med("nginx, 64", "rps") / med("nginx to owner only, 64", "rps")
        print(f"calls/s, 64 in flight, nginx over 3 replicas / nginx to the owner only: {alone:.2f}x (what forwarding costs)")
        modern = med("modern nginx, 64", "rps") / med("modern owner, 64", "rps")
        print(f"2026-07-28 clients, 64 in flight, nginx over 3 replicas / straight to one: {modern:.2f}x")
    finally:
        for directory in (nginx_dir, solo_dir):
            subprocess.run([str(ROOT / "scripts" / "nginx"), "stop", str(directory)], check=False)
        for process in replicas:
            process.terminate()
        for process in replicas:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        subprocess.run(["pkill", "-f", "examples/stdio_fixture"], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
