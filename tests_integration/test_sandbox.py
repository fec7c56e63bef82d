"""`mcp-stdio sandbox` driven by the Python SDK client (mcp 2.3.0): over stdio in the
handshake era and in 2026-07-28, and over HTTP through `mcp-stdio serve` (which runs the
sandbox when given no command)."""

import os
import subprocess

import pytest
from helpers.processes import start_serve, stop_serve
from helpers.host import relay_binary
from mcp import StdioServerParameters
from mcp.client import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    (root / ".env").write_text("TOKEN=do-not-leak-this-value\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE")
    os.symlink(tmp_path / "outside.txt", root / "escape")
    return root


def check(result_text: str, structured: dict) -> None:
    assert "do-not-leak-this-value" not in result_text and "OUTSIDE" not in str(structured)


async def all_tools(client: Client) -> list[str]:
    """Every page of tools/list (the sandbox pages it)."""
    names, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names


async def exercise(client: Client) -> None:
    names = await all_tools(client)
    assert names == ["read_file", "list_directory", "search_text", "file_info", "git_log", "git_diff", "system_metrics"]
    read = await client.call_tool("read_file", {"path": "src/lib.rs"})
    assert not read.is_error
    assert read.structured_content["content"] == "pub fn answer() -> u32 { 42 }\n"
    assert read.structured_content["receipt"]["path"] == "src/lib.rs"
    escape = await client.call_tool("read_file", {"path": "escape"})
    assert escape.is_error
    assert "inside the workspace root 'project/'" in escape.content[0].text
    denied = await client.call_tool("read_file", {"path": ".env"})
    assert denied.is_error
    found = await client.call_tool("search_text", {"pattern": "answer|TOKEN"})
    check(found.content[0].text, found.structured_content)
    assert found.structured_content["matches"][0]["path"] == "src/lib.rs"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_the_sandbox_over_stdio(workspace, mode):
    params = StdioServerParameters(command=relay_binary(), args=["sandbox", "--root", str(workspace)])
    async with Client(params, mode=mode, cache=None) as client:
        await exercise(client)
        if mode != "legacy":
            assert client.session.protocol_version == "2026-07-28"


async def test_the_sandbox_through_serve(workspace):
    process, url = start_serve([relay_binary(), "sandbox", "--root", str(workspace)])
    try:
        async with Client(url, mode="legacy", cache=None) as client:
            await exercise(client)
    finally:
        assert stop_serve(process) == 0


def test_serve_with_no_command_serves_the_current_directory(workspace):
    process = subprocess.Popen(
        [relay_binary(), "serve", "--port", "0"],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stderr.readline()
        assert "sandbox --root" in line and " at http://" in line, line
    finally:
        process.terminate()
        process.wait(timeout=15)
