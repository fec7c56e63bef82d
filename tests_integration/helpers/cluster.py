"""Several `mcp-stdio serve` replicas sharing a cluster key, behind a real nginx (Debian's
package, started by `scripts/nginx` with `deploy/nginx.conf.template`, round-robin, no
stickiness). Each replica's stderr goes to a file; `/metrics` of one replica is read
directly."""

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from helpers.paths import ROOT, relay_binary
from helpers.processes import free_port, wait_listening

KEY = "integration-cluster-key-of-more-than-thirty-two-bytes"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def key_file(directory: Path, key: str = KEY) -> Path:
    path = directory / "cluster.key"
    path.write_text(key + "\n")
    path.chmod(0o600)
    return path


class Replica:
    def __init__(self, directory: Path, key: Path, command: list[str], flags: tuple, env: dict | None,
                 port: int | None = None, advertise: str | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = directory / f"replica-{self.port}.log"
        self.log_file = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [relay_binary(), "serve", "--port", str(self.port), "--cluster-key-file", str(key),
             "--advertise-url", advertise or f"http://127.0.0.1:{self.port}", "--log-level", "info", *flags, "--", *command],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log_file, env=env,
        )
        wait_listening(self.port, self.process)

    def log(self) -> str:
        return self.log_path.read_text()

    def get(self, path: str, headers: dict | None = None) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def metric(self, name: str, headers: dict | None = None) -> float:
        _, text = self.get("/metrics", headers)
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                rest = line[len(name):]
                if rest[:1] in (" ", "{"):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def signal(self, sig) -> None:
        self.process.send_signal(sig)

    def stop(self) -> None:
        if self.process.poll() is None:
            # The first SIGTERM drains (sessions may take the whole grace); the second ends it.
            self.process.terminate()
            deadline = time.monotonic() + 5
            while "draining" not in self.log() and self.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.process.poll() is None:
                self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()


class RecordingRelay:
    """A TCP relay on 127.0.0.1 to `target_port` that records what its clients send: the
    replica hop as someone on that network sees it."""

    def __init__(self, target_port: int):
        import socket
        import threading

        self.seen = bytearray()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]

        def pipe(source, sink, record):
            try:
                while data := source.recv(65536):
                    if record:
                        self.seen.extend(data)
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    try:
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        def serve():
            while True:
                try:
                    client, _ = self.listener.accept()
                except OSError:
                    return
                server = socket.create_connection(("127.0.0.1", target_port))
                threading.Thread(target=pipe, args=(client, server, True), daemon=True).start()
                threading.Thread(target=pipe, args=(server, client, False), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    def close(self) -> None:
        self.listener.close()


class Cluster:
    """`n` replicas of `serve … -- command` and nginx in front; `url` is nginx's. The
    replicas numbered in `recorded` advertise themselves through a `RecordingRelay`
    (`relays[i]`)."""

    def __init__(self, directory: Path, command: list[str], n: int = 3, flags: tuple = (), env: dict | None = None,
                 nginx_port: int | None = None, recorded: tuple = ()):
        self.directory = directory
        self.key = key_file(directory)
        self.replicas = []
        self.relays = {}
        self.nginx_dir = directory / "nginx"
        try:
            for i in range(n):
                port, advertise = None, None
                if i in recorded:
                    port = free_port()
                    self.relays[i] = RecordingRelay(port)
                    advertise = f"http://127.0.0.1:{self.relays[i].port}"
                self.replicas.append(Replica(directory, self.key, command, flags, env, port, advertise))
            self.port = nginx_port or free_port()
            self.url = f"http://127.0.0.1:{self.port}/mcp"
            subprocess.run([str(ROOT / "scripts" / "nginx"), "start", str(self.nginx_dir), str(self.port),
                            *[str(r.port) for r in self.replicas]], check=True, timeout=600)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        subprocess.run([str(ROOT / "scripts" / "nginx"), "stop", str(self.nginx_dir)], timeout=30)
        for replica in self.replicas:
            replica.stop()
        for relay in self.relays.values():
            relay.close()

    def owner_of_sessions(self) -> list[int]:
        """Open sessions per replica (`mcp_stdio_sessions`, children of the pool included)."""
        return [int(r.metric("mcp_stdio_sessions")) for r in self.replicas]


def post(url: str, message: dict, session: str | None = None, headers: dict | None = None) -> tuple[int, dict, str]:
    """One POST; the status, the response headers and the body (SSE bodies as they are)."""
    all_headers = {**HEADERS, **(headers or {})}
    if session:
        all_headers["mcp-session-id"] = session
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=all_headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def answer_of(body: str) -> dict:
    """The JSON-RPC answer in a JSON or SSE body."""
    if body.lstrip().startswith("{"):
        return json.loads(body)
    for line in reversed(body.splitlines()):
        if line.startswith("data: "):
            return json.loads(line[6:])
    raise AssertionError(f"no answer in {body[:300]}")


def initialize(url: str, headers: dict | None = None) -> str:
    status, response_headers, body = post(url, INIT, headers=headers)
    assert status == 200, body
    session = {k.lower(): v for k, v in response_headers.items()}["mcp-session-id"]
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session, headers)
    return session


def wait_for(what: str, check, deadline_s: float = 20.0):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline_s} s: {what}")

