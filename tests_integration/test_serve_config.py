"""`mcp-stdio serve --config`: server-everything and the built-in sandbox from one `.mcp.json`
written the way Claude Code writes it (`claude mcp add --scope project`: two-space JSON,
`type`, `command`, `args`, `env`), each driven by the Python SDK client (mcp 2.3.0) at its
own path in both eras; then a SIGHUP reload that adds, removes and changes servers while a
session on the unchanged one keeps working, and a broken file that changes nothing."""

import signal

import pytest
from helpers.paths import INTEGRATION, NODE_BIN, NPM_BIN, relay_binary
from helpers.served import Served, claude_code_mcp_json
from mcp.client import Client

pytestmark = pytest.mark.anyio


EVERYTHING = (str(NODE_BIN / "node"), [str(NPM_BIN / "mcp-server-everything"), "stdio"], {"PATH": f"{NODE_BIN}:/usr/bin:/bin"})
SANDBOX = (relay_binary(), ["sandbox", "--root", str(INTEGRATION)], {})


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
