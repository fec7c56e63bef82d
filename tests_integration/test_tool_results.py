"""Every tool result of ours as a schema-checking client reads it. The TypeScript SDK client
(Claude Code, Claude Desktop, Cursor, VS Code, the Inspector) validates `structuredContent`
against the tool's `outputSchema` whenever it is present, error results included; so here
every sandbox tool is called for its success and for every refusal kind, and each result is
validated against the tool's own `outputSchema` by a JSON Schema validator (jsonschema,
Draft 2020-12, the spec's default dialect), over stdio in both eras and through `serve`.
A refusal must also carry its words (what was refused, why, what would work) in its first
text block, and its RFC 9457 problem document in `_meta` and as a JSON block."""

import subprocess

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from helpers.host import relay_binary
from helpers.processes import start_serve, stop_serve
from helpers.results import checked, output_schemas, wire

pytestmark = pytest.mark.anyio


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    (root / ".env").write_text("TOKEN=do-not-leak-this-value\n")
    (root / "blob.bin").write_bytes(b"\xff\xfe\x00\x81")
    (tmp_path / "outside.txt").write_text("OUTSIDE")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "src"], check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], check=True)
    (root / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 43 }\n")
    return root


# (tool, arguments, the refusal code or None for a success)
CALLS = [
    ("read_file", {"path": "src/lib.rs"}, None),
    ("read_file", {"path": "src/lib.rs", "start_line": 1, "end_line": 1}, None),
    ("read_file", {"path": ".env"}, "MCP_ACCESS_DENIED"),
    ("read_file", {"path": "../outside.txt"}, "MCP_ACCESS_DENIED"),
    ("read_file", {"path": "src/missing.rs"}, "MCP_NOT_FOUND"),
    ("read_file", {"path": "src"}, "MCP_VALIDATION_ERROR"),
    ("read_file", {"path": "blob.bin"}, "MCP_UNSUPPORTED_CONTENT"),
    ("list_directory", {"path": "."}, None),
    ("list_directory", {"glob": "[unclosed"}, "MCP_VALIDATION_ERROR"),
    ("list_directory", {"path": "src/lib.rs"}, "MCP_VALIDATION_ERROR"),
    ("list_directory", {"path": "../"}, "MCP_ACCESS_DENIED"),
    ("search_text", {"pattern": "answer"}, None),
    ("search_text", {"pattern": "(unclosed"}, "MCP_VALIDATION_ERROR"),
    ("search_text", {"pattern": "x", "path": "nowhere"}, "MCP_NOT_FOUND"),
    ("file_info", {"path": "src/lib.rs"}, None),
    ("file_info", {"path": "src/missing.rs"}, "MCP_NOT_FOUND"),
    ("file_info", {"path": ".env"}, "MCP_ACCESS_DENIED"),
    ("git_log", {"max_count": 5}, None),
    ("git_log", {"path": "../outside.txt"}, "MCP_ACCESS_DENIED"),
    ("git_diff", {}, None),
    ("git_diff", {"revision": "no-such-revision"}, "MCP_VALIDATION_ERROR"),
    ("system_metrics", {}, None),
]


async def every_kind(client) -> set:
    """Calls the whole matrix; returns the (tool, code) pairs seen."""
    tools = await output_schemas(client)
    assert set(tools) == {name for name, _, _ in CALLS}, "every tool is in the matrix"
    seen = set()
    for name, arguments, code in CALLS:
        result = await client.call_tool(name, arguments)
        got = checked(tools, name, result)
        if code is None:
            assert not result.is_error, (name, arguments, wire(result))
        else:
            assert result.is_error and got["code"] == code, (name, arguments, got)
        seen.add((name, code))
    return seen


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_every_sandbox_result_matches_its_output_schema_over_stdio(workspace, mode):
    params = StdioServerParameters(command=relay_binary(), args=["sandbox", "--root", str(workspace)])
    async with Client(params, mode=mode, cache=None) as client:
        seen = await every_kind(client)
    assert len(seen) == len({(n, c) for n, _, c in CALLS})


async def test_timeout_and_busy_refusals_match_too(workspace):
    params = StdioServerParameters(command=relay_binary(), args=["sandbox", "--root", str(workspace), "--call-timeout", "0.000001"])
    async with Client(params, mode="legacy", cache=None) as client:
        tools = await output_schemas(client)
        late = await client.call_tool("search_text", {"pattern": "answer"})
        assert checked(tools, "search_text", late)["code"] == "MCP_EXECUTION_TIMEOUT"
    params = StdioServerParameters(command=relay_binary(), args=[
        "sandbox", "--root", str(workspace), "--max-concurrent-calls", "1", "--queue-wait", "0.01"])
    async with Client(params, mode="legacy", cache=None) as client:
        tools = await output_schemas(client)
        results = []

        async def call():
            results.append(await client.call_tool("system_metrics", {}))

        async with anyio.create_task_group() as group:
            for _ in range(2):
                group.start_soon(call)
        codes = sorted(checked(tools, "system_metrics", r).get("code", "ok") for r in results)
        assert codes == ["MCP_BUSY", "ok"], [wire(r) for r in results]


async def test_a_malformed_call_is_a_protocol_error_that_says_what_would_work(workspace):
    params = StdioServerParameters(command=relay_binary(), args=["sandbox", "--root", str(workspace)])
    async with Client(params, mode="legacy", cache=None) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("read_file", {"path": "a", "mode": "w"})
        assert refused.value.error.code == -32602
        assert "mode" in refused.value.error.message
        assert refused.value.error.data["invalid_params"] == ["mode"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_results_forwarded_by_serve_still_match(workspace, mode):
    process, url = start_serve([relay_binary(), "sandbox", "--root", str(workspace)])
    try:
        async with Client(url, mode=mode, cache=None) as client:
            await every_kind(client)
    finally:
        stop_serve(process)
