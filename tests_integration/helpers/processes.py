"""Real peers as subprocesses: free ports, waiting (with a deadline) until a server accepts
connections, server-everything, and `mcp-stdio serve` in front of a command."""

import os
import re
import socket
import subprocess
import time

from helpers.paths import NODE_BIN, NPM_BIN, relay_binary


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


def start_everything(mode: str) -> Server:
    """server-everything over HTTP in `mode` (`streamableHttp` or `sse`) on a free port."""
    port = free_port()
    env = node_env()
    env["PORT"] = str(port)
    return Server([str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), mode], port, env=env)


def start_serve(command: list[str], env: dict | None = None, flags: tuple = ()):
    """`mcp-stdio serve --port 0 [FLAGS] -- COMMAND…`; returns the process and the URL it printed."""
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
