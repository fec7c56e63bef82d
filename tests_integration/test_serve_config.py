"""`mcp-stdio serve --config`: server-everything and the built-in sandbox from one `.mcp.json`
written the way Claude Code writes it (`claude mcp add --scope project`: two-space JSON,
`type`, `command`, `args`, `env`), each driven by the Python SDK client (mcp 2.3.0) at its
own path in both eras; then a SIGHUP reload that adds, removes and changes servers while a
session on the unchanged one keeps working, and a broken file that changes nothing."""

import json
import re
import signal
import subprocess
import threading
import time

import pytest
from helpers.paths import INTEGRATION, NODE_BIN, NPM_BIN, relay_binary
from mcp.client import Client

pytestmark = pytest.mark.anyio


def claude_code_mcp_json(servers: dict) -> str:
    """What Claude Code writes to .mcp.json: JSON.stringify(config, null, 2) plus a newline."""
    entries = {name: {"type": "stdio", "command": command, "args": args, "env": env} for name, (command, args, env) in servers.items()}
    return json.dumps({"mcpServers": entries}, indent=2) + "\n"


EVERYTHING = (str(NODE_BIN / "node"), [str(NPM_BIN / "mcp-server-everything"), "stdio"], {"PATH": f"{NODE_BIN}:/usr/bin:/bin"})
SANDBOX = (relay_binary(), ["sandbox", "--root", str(INTEGRATION)], {})


class Served:
    def __init__(self, config_file):
        self.log = []
        self.process = subprocess.Popen(
            [relay_binary(), "serve", "--port", "0", "--log-level", "info", "--reload-grace", "2", "--config", str(config_file)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for line in self.process.stderr:
            self.log.append(line)
            match = re.search(r" at (http://127\.0\.0\.1:\d+)/", line)
            if match:
                self.base = match.group(1)
                break
        else:
            raise RuntimeError("serve never printed its URL")
        # Drained all along, so serve never blocks on a full stderr pipe.
        threading.Thread(target=lambda: self.log.extend(iter(self.process.stderr.readline, "")), daemon=True).start()

    def read_log_until(self, needle: str, deadline_s: float = 20.0) -> str:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if any(needle in line for line in list(self.log)):
                return "".join(self.log)
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} never logged: {''.join(self.log)}")

    def stop(self):
        self.process.terminate()
        return self.process.wait(timeout=15)


@pytest.fixture
def mcp_json(tmp_path):
    path = tmp_path / ".mcp.json"
    path.write_text(claude_code_mcp_json({"everything": EVERYTHING, "files": SANDBOX}))
    return path


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_two_servers_from_a_claude_code_mcp_json_in_both_eras(mcp_json, mode):
    served = Served(mcp_json)
    try:
        async with Client(f"{served.base}/everything/mcp", mode=mode, cache=None) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "echo" in names, names
            result = await client.call_tool("echo", {"message": "through the config"})
            assert "through the config" in result.content[0].text
        async with Client(f"{served.base}/files/mcp", mode=mode, cache=None) as client:
            result = await client.call_tool("file_info", {"path": "conftest.py"})
            assert not result.is_error, result
            assert "conftest.py" in " ".join(getattr(b, "text", "") for b in result.content)
    finally:
        assert served.stop() == 0


async def test_a_reload_while_a_session_on_an_unchanged_server_keeps_working(mcp_json):
    served = Served(mcp_json)
    try:
        async with Client(f"{served.base}/files/mcp", mode="legacy", cache=None) as kept:
            assert not (await kept.call_tool("file_info", {"path": "conftest.py"})).is_error

            # files unchanged; everything removed; docs added; a broken file first changes nothing.
            mcp_json.write_text('{"mcpServers": {"files": ')
            served.process.send_signal(signal.SIGHUP)
            served.read_log_until("not reloaded")
            assert not (await kept.call_tool("file_info", {"path": "conftest.py"})).is_error

            mcp_json.write_text(claude_code_mcp_json({"files": SANDBOX, "docs": (SANDBOX[0], ["sandbox", "--root", str(INTEGRATION / "helpers")], {})}))
            served.process.send_signal(signal.SIGHUP)
            log = served.read_log_until("SIGHUP: reloaded")
            assert "added=docs changed= removed=everything unchanged=files" in log, log

            # The session opened before the reload goes on, on the same child.
            result = await kept.call_tool("file_info", {"path": "conftest.py"})
            assert not result.is_error, result
            async with Client(f"{served.base}/docs/mcp", mode="2026-07-28", cache=None) as docs:
                assert not (await docs.call_tool("file_info", {"path": "paths.py"})).is_error

            # A change (another root) restarts docs for new sessions only.
            mcp_json.write_text(claude_code_mcp_json({"files": SANDBOX, "docs": (SANDBOX[0], ["sandbox", "--root", str(INTEGRATION / "peers")], {})}))
            served.process.send_signal(signal.SIGHUP)
            log = served.read_log_until("changed=docs")
            async with Client(f"{served.base}/docs/mcp", mode="2026-07-28", cache=None) as docs:
                result = await docs.call_tool("file_info", {"path": "py_server.py"})
                assert not result.is_error, result
            assert not (await kept.call_tool("file_info", {"path": "conftest.py"})).is_error
    finally:
        assert served.stop() == 0
