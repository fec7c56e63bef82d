"""Benchmarks `mcp-stdio serve --config FILE --aggregate` (issue 31), in one run. Not a
test: it reports figures.

Usage: scripts/bench/aggregate-run [--seconds S] [--rounds N]

- Calls through the aggregate endpoint against the same backend published alone by the
  same process (`/fixture/mcp` and `/mcp`, one server in the file, the release build of
  examples/stdio_fixture.rs): p50 of one call at a time, calls/s with 16 in flight, in
  alternating rounds; ratio and p50 difference (targets: >= 0.9x, <= +50 us).
- `tools/list` p50 through the aggregate with 5 backends of 50 tools each, once warm
  (target <= 2 ms), and against tower-mcp's mcp-proxy 0.6.0 fronting the same five.
- The gateway's RSS with 10 configured backends before the first client, and after one
  client listed their tools (the scouts started).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve as common  # noqa: E402  (the serve benchmark's helpers: wrk, sessions, RSS)

ROOT = common.ROOT
FIXTURE = str(ROOT / "target" / "release" / "examples" / "stdio_fixture")
OURS = common.OURS
LIST_SCRIPT = """
counter = 0
request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/list","params":{}}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Accept"] = "application/json, text/event-stream", ["Mcp-Session-Id"] = os.getenv("SESSION")}, body)
end
"""


def config(servers: int, extra_tools: int) -> str:
    lines = []
    for n in range(servers):
        name = "fixture" if servers == 1 else f"s{n + 1}"
        lines.append(f'[servers.{name}]\ncommand = {json.dumps(FIXTURE)}\nenv = {{ FIXTURE_EXTRA_TOOLS = "{extra_tools}" }}\n')
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("\n".join(lines))
        return f.name


def start(file: str, port: int) -> subprocess.Popen:
    process = subprocess.Popen([OURS, "serve", "--port", str(port), "--log-level", "off", "--config", file, "--aggregate"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    common.wait_up(f"http://127.0.0.1:{port}/mcp", process)
    return process


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def script(text: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(text)
        return f.name


def calls(seconds: int, rounds: int) -> None:
    port = common.free_port()
    process = start(config(1, 0), port)
    call_script = script(common.WRK_SCRIPT)
    rows = {"alone": [], "aggregate": []}
    try:
        for _ in range(rounds):
            for label, path, tool in (("alone", "/fixture/mcp", "echo"), ("aggregate", "/mcp", "fixture__echo")):
                url = f"http://127.0.0.1:{port}{path}"
                session = common.open_session(url)
                common.check_call(url, session, tool)
                one = common.wrk(url, session, 1, seconds, call_script, tool)
                many = common.wrk(url, session, 16, seconds, call_script, tool)
                rows[label].append((one["p50_ms"], many["rps"], one["errors"] + many["errors"]))
    finally:
        stop(process)
    print("\n## Calls through the aggregate against the same backend alone (one server, 16 in flight)\n")
    print("| round | alone p50 ms | aggregate p50 ms | +us | alone calls/s | aggregate calls/s | ratio | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for n, (alone, aggregate) in enumerate(zip(rows["alone"], rows["aggregate"]), 1):
        print(f"| {n} | {alone[0]:.3f} | {aggregate[0]:.3f} | {1000 * (aggregate[0] - alone[0]):+.0f} | {alone[1]:.0f} | {aggregate[1]:.0f} | {aggregate[1] / alone[1]:.2f} | {alone[2] + aggregate[2]} |")
    med = lambda label, i: statistics.median(r[i] for r in rows[label])  # noqa: E731
    print(f"| median | {med('alone', 0):.3f} | {med('aggregate', 0):.3f} | {1000 * (med('aggregate', 0) - med('alone', 0)):+.0f} | {med('alone', 1):.0f} | {med('aggregate', 1):.0f} | {med('aggregate', 1) / med('alone', 1):.2f} | |")


def tools_list(seconds: int) -> None:
    port = common.free_port()
    process = start(config(5, 35), port)
    url = f"http://127.0.0.1:{port}/mcp"
    list_script = script(LIST_SCRIPT)
    try:
        session = common.open_session(url)
        _, body = common.post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, session)
        count = len(json.loads(body)["result"]["tools"])
        warm = common.wrk(url, session, 1, seconds, list_script)
        ours = (count, warm["p50_ms"], warm["p99_ms"], warm["rps"], warm["errors"])
    finally:
        stop(process)
    tower = tower_tools_list(seconds)
    print("\n## tools/list through one endpoint, 5 backends of 50 tools, once warm (one at a time)\n")
    print("| gateway | tools | p50 ms | p99 ms | lists/s | errors |")
    print("|---|---|---|---|---|---|")
    print(f"| mcp-stdio serve --aggregate | {ours[0]} | {ours[1]:.3f} | {ours[2]:.3f} | {ours[3]:.0f} | {ours[4]} |")
    if tower:
        print(f"| mcp-proxy 0.6.0 (tower-mcp) | {tower[0]} | {tower[1]:.3f} | {tower[2]:.3f} | {tower[3]:.0f} | {tower[4]} |")
    else:
        print("| mcp-proxy 0.6.0 (tower-mcp) | not installed (scripts/bench/serve-run installs it) | | | | |")


def tower_tools_list(seconds: int):
    if not common.TOWER_PROXY.exists():
        return None
    port = common.free_port()
    backends = "".join(
        f'\n[[backends]]\nname = "s{n}"\ntransport = "stdio"\ncommand = {json.dumps(FIXTURE)}\nargs = []\nenv = {{ FIXTURE_EXTRA_TOOLS = "35" }}\n'
        for n in range(1, 6))
    text = f'[proxy]\nname = "bench"\nseparator = "__"\n\n[proxy.listen]\nhost = "127.0.0.1"\nport = {port}\n{backends}'
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    process = subprocess.Popen([str(common.TOWER_PROXY), "--config", f.name], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        common.wait_up(url, process)
        session = common.open_session(url)
        _, body = common.post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, session)
        text = body.decode()
        payload = json.loads(text[text.index("{"):] if text.startswith("{") else [l[6:] for l in text.splitlines() if l.startswith("data: ")][-1])
        count = len(payload["result"]["tools"])
        warm = common.wrk(url, session, 1, seconds, script(LIST_SCRIPT))
        return (count, warm["p50_ms"], warm["p99_ms"], warm["rps"], warm["errors"])
    except Exception as error:  # reported, not raised: the figure is the point
        print(f"tower-mcp mcp-proxy: {error}", file=sys.stderr)
        return None
    finally:
        stop(process)


def rss() -> None:
    port = common.free_port()
    process = start(config(10, 35), port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        time.sleep(0.5)
        before = common.rss_kib(process.pid)
        session = common.open_session(url)
        common.post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, session)
        time.sleep(0.3)
        after = common.rss_kib(process.pid)
    finally:
        stop(process)
    print("\n## The gateway's memory with 10 configured backends\n")
    print("| when | RSS MiB |")
    print("|---|---|")
    print(f"| before the first client (no child started) | {before / 1024:.1f} |")
    print(f"| after one client listed every tool (10 scout children, 500 tools) | {after / 1024:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.pop("http_proxy", None)
    calls(args.seconds, args.rounds)
    tools_list(args.seconds)
    rss()


if __name__ == "__main__":
    main()
