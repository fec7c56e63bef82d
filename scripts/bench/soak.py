"""A soak of `mcp-stdio serve` (a benchmark, not a test): clients of both eras call through
one serve for a while, every answer is checked, and serve's RSS, file descriptors, child
processes, live tasks and pending requests are sampled over time.

Usage: scripts/bench/soak-run [--minutes M] [--clients N] [--backend fixture|everything] [--sample S]

Half the clients are handshake-era: each opens a session, calls `echo` with a text of its
own (and, every tenth call, `progress`, whose answer comes on an SSE stream), and every 200
calls deletes its session and opens a new one. The other half are 2026-07-28 clients: no
session, the per-request envelope and routing headers, the same calls. An answer that is
not the one asked for is a wrong answer; any other failure is an error.

The verdict: 0 errors, 0 wrong answers, and flat after warm-up (the first fifth of the
run): RSS at most 10 % (and 2 MiB) above the highest warm-up reading, no new high of fds,
children or tasks after warm-up, and no request still waiting for a child once the
clients have stopped.
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve as bench  # noqa: E402  (the shared helpers: ports, /proc readings, backends)

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class Totals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.errors = 0
        self.wrong = 0
        self.first_errors: list[str] = []

    def add(self, calls: int = 0, errors: int = 0, wrong: int = 0, why: str | None = None) -> None:
        with self.lock:
            self.calls += calls
            self.errors += errors
            self.wrong += wrong
            if why and len(self.first_errors) < 5:
                self.first_errors.append(why)


def answer_of(response: http.client.HTTPResponse, body: bytes) -> dict:
    """The JSON-RPC answer in a JSON or an SSE body (the last `data:` that has an id)."""
    if response.getheader("content-type", "").startswith("text/event-stream"):
        answers = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]
        answers = [a for a in answers if "id" in a and ("result" in a or "error" in a)]
        return answers[-1] if answers else {}
    return json.loads(body)


class Client(threading.Thread):
    def __init__(self, number: int, port: int, modern: bool, stop: threading.Event, totals: Totals) -> None:
        super().__init__(daemon=True)
        self.number, self.port, self.modern, self.stop, self.totals = number, port, modern, stop, totals
        self.session: str | None = None
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, message: dict, extra: dict[str, str] | None = None) -> tuple[http.client.HTTPResponse, bytes]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **(extra or {})}
        if self.session:
            headers["mcp-session-id"] = self.session
        self.connection.request("POST", "/mcp", json.dumps(message), headers)
        response = self.connection.getresponse()
        return response, response.read()

    def open_session(self) -> None:
        self.session = None
        response, _ = self.post(bench.INIT)
        if response.status != 200:
            raise RuntimeError(f"initialize: HTTP {response.status}")
        self.session = response.getheader("mcp-session-id")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close_session(self) -> None:
        self.connection.request("DELETE", "/mcp", headers={"mcp-session-id": self.session})
        self.connection.getresponse().read()

    def call(self, n: int) -> None:
        text = f"c{self.number}-{n}"
        tool = "progress" if n % 10 == 0 and bench.BACKEND is bench.FIXTURE else "echo"
        params: dict = {"name": tool, "arguments": {bench.ECHO_ARGUMENT: text}}
        extra = None
        if tool == "progress":
            params["_meta"] = {"progressToken": text}
        if self.modern:
            params["_meta"] = {**params.get("_meta", {}), **MODERN_META}
            extra = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool}
        response, body = self.post({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}, extra)
        if response.status != 200:
            self.totals.add(errors=1, why=f"HTTP {response.status}: {body[:200]!r}")
            return
        answer = answer_of(response, body)
        content = answer.get("result", {}).get("content") or [{}]
        got = content[0].get("text")
        # The fixture echoes the text; server-everything says "Echo: TEXT".
        want = {"progressed"} if tool == "progress" else {text, f"Echo: {text}"}
        if answer.get("id") != n or got not in want:
            self.totals.add(wrong=1, why=f"asked {n} {tool} {text}, got {json.dumps(answer)[:200]}")
            return
        self.totals.add(calls=1)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                if not self.modern and (self.session is None or n % 200 == 199):
                    if self.session:
                        self.close_session()
                    self.open_session()
                n += 1
                self.call(n)
            except Exception as error:  # a broken connection, a timeout: counted, then go on
                self.totals.add(errors=1, why=f"{type(error).__name__}: {error}")
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                self.session = None
                time.sleep(0.1)


def gauge(port: int, name: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return next(int(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))


def sample(process: subprocess.Popen, port: int) -> dict:
    pid = process.pid
    # The kernel's own list of each thread's children (a scan of /proc/*/stat under this
    # load was seen to miss processes).
    children = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children += len(Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except OSError:
            continue
    return {
        "rss_mib": bench.rss_kib(pid) / 1024,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "children": children,
        "tasks": gauge(port, "mcp_stdio_tasks"),
        "pending": gauge(port, "mcp_stdio_pending_requests"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--backend", choices=["fixture", "everything"], default="fixture")
    parser.add_argument("--sample", type=float, default=30, help="seconds between samples")
    parser.add_argument("--binary", default=str(bench.ROOT / "target" / "release" / "mcp-stdio"), help="the mcp-stdio binary to soak")
    args = parser.parse_args()
    if args.backend == "everything":
        bench.BACKEND, bench.ECHO_ARGUMENT = bench.EVERYTHING, "message"
    port = bench.free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    # Room for every legacy client's session and the pool's backend, with the default spares.
    command = [args.binary, "serve", "--port", str(port), "--log-level", "warn", "--max-sessions", str(args.clients + 8), "--", *bench.BACKEND]
    log = open(bench.ROOT / ".cache" / "bench" / "soak-serve.log", "w")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    stop = threading.Event()
    totals = Totals()
    try:
        bench.wait_up(url, process)
        clients = [Client(i, port, i % 2 == 1, stop, totals) for i in range(args.clients)]
        for client in clients:
            client.start()
        duration = args.minutes * 60
        start = time.monotonic()
        samples = []
        print(f"soak: {args.clients} clients ({args.clients // 2} handshake-era sessions, {args.clients - args.clients // 2} 2026-07-28), backend {args.backend}, {args.minutes:g} min\n")
        print("| min | calls | calls/s | errors | wrong | RSS MiB | fds | children | tasks | pending |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        last_calls, last_at = 0, start
        while True:
            time.sleep(min(args.sample, max(0.0, start + duration - time.monotonic())))
            now = time.monotonic()
            reading = {**sample(process, port), "at_min": (now - start) / 60, "calls": totals.calls}
            rate = (totals.calls - last_calls) / max(now - last_at, 1e-9)
            last_calls, last_at = totals.calls, now
            samples.append(reading)
            print(f"| {reading['at_min']:.1f} | {totals.calls} | {rate:.0f} | {totals.errors} | {totals.wrong} | {reading['rss_mib']:.1f} | {reading['fds']} | {reading['children']} | {reading['tasks']} | {reading['pending']} |", flush=True)
            if now - start >= duration:
                break
        stop.set()
        for client in clients:
            client.join(timeout=35)
        if process.poll() is not None:
            raise RuntimeError(f"serve exited with {process.returncode} during the soak")
        # Every client has stopped: nothing may still wait for a child.
        time.sleep(1)
        quiet = sample(process, port)
        # Warm-up is the first fifth. Flat: RSS at most 10 % (and 2 MiB) above the highest
        # warm-up reading, and no new high of fds, children or tasks after warm-up (the
        # readings are instants: a session being replaced, a call in flight, move them).
        warm = [s for s in samples if s["at_min"] <= args.minutes / 5] or samples[:1]
        after = [s for s in samples if s not in warm] or warm
        high = {k: max(s[k] for s in warm) for k in ("rss_mib", "fds", "children", "tasks")}
        top = {k: max(s[k] for s in after) for k in ("rss_mib", "fds", "children", "tasks")}
        rss_flat = top["rss_mib"] <= max(high["rss_mib"] * 1.10, high["rss_mib"] + 2)
        held_flat = all(top[k] <= high[k] for k in ("fds", "children", "tasks")) and quiet["pending"] == 0
        print(f"\ncalls {totals.calls} ({totals.calls / duration:.0f}/s), errors {totals.errors}, wrong answers {totals.wrong}")
        print(f"highest reading in warm-up (first {args.minutes / 5:g} min) -> after it: RSS {high['rss_mib']:.1f} -> {top['rss_mib']:.1f} MiB ({'flat' if rss_flat else 'GROWING'}); "
              f"fds {high['fds']} -> {top['fds']}, children {high['children']} -> {top['children']}, tasks {high['tasks']} -> {top['tasks']}; "
              f"pending once the clients stopped: {quiet['pending']} ({'flat' if held_flat else 'GROWING'})")
        for why in totals.first_errors:
            print(f"  first errors: {why}")
        verdict = totals.errors == 0 and totals.wrong == 0 and rss_flat and held_flat
        print(f"verdict: {'PASS' if verdict else 'FAIL'} (target: 0 errors, 0 wrong answers, RSS and fds flat after warm-up)")
        sys.exit(0 if verdict else 1)
    finally:
        stop.set()
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        bench.kill_backends()


if __name__ == "__main__":
    main()
