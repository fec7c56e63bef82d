"""The relay over the 2024-11-05 HTTP+SSE transport, driven by the Python SDK client:
@modelcontextprotocol/server-everything in `sse` mode and the Python SDK's own SSE server
(conformance_server.py --sse), with `--transport sse` and with `auto` finding it alone;
every tool works, and a server restarted mid-session is reconnected to without the host
noticing more than the calls that were in flight."""

import subprocess
import sys
import time

import anyio
import pytest
from helpers.paths import PEER_SCRIPTS
from helpers.processes import free_port, Server, start_everything
from helpers.host import through_relay
from mcp.shared.exceptions import MCPError
from test_server_everything import EXPECTED, sample_arguments

pytestmark = pytest.mark.anyio


@pytest.fixture
def everything_sse():
    server = start_everything("sse")
    server.url = f"http://127.0.0.1:{server.port}/sse"
    yield server
    server.stop()


def python_sse_server(port: int) -> Server:
    server = Server([sys.executable, str(PEER_SCRIPTS / "conformance_server.py"), "--sse", str(port)], port)
    server.url = f"http://127.0.0.1:{port}/sse"
    return server


@pytest.mark.parametrize("transport", ["sse", "auto"])
async def test_every_tool_of_server_everything_over_http_sse(everything_sse, transport):
    async with through_relay(everything_sse.url, "--transport", transport) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        assert set(EXPECTED) <= {tool.name for tool in tools}
        for tool in tools:
            result = await session.call_tool(tool.name, sample_arguments(tool))
            text = " ".join(getattr(block, "text", "") or "" for block in result.content)
            if tool.name in EXPECTED:
                assert not result.is_error, f"{tool.name}: {text}"
                assert EXPECTED[tool.name] in text, f"{tool.name}: {text}"


async def test_the_python_sdk_sse_server_works_and_survives_a_restart():
    port = free_port()
    server = python_sse_server(port)
    try:
        async with through_relay(server.url, "--transport", "sse") as session:
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"test_simple_text", "test_sampling", "test_elicitation", "test_tool_with_progress"} <= names
            simple = await session.call_tool("test_simple_text", {})
            assert "simple text" in simple.content[0].text
            sampled = await session.call_tool("test_sampling", {"prompt": "hi"})
            assert "sampled through the relay" in sampled.content[0].text
            progress = []

            async def on_progress(value, total, message):
                progress.append(value)

            await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            assert progress == [0, 50, 100]

            # The server goes away and comes back on the same port (its sessions lost).
            server.stop()
            server = python_sse_server(port)
            deadline = time.monotonic() + 30
            while True:
                try:
                    after = await session.call_tool("test_simple_text", {})
                    break
                except MCPError as error:
                    # Only the relay's "reconnecting" answers, until the new stream is up.
                    assert "HTTP+SSE" in str(error) or "stream" in str(error), error
                    assert time.monotonic() < deadline, f"never reconnected: {error}"
                    await anyio.sleep(0.2)
            assert "simple text" in after.content[0].text
            elicited = await session.call_tool("test_elicitation", {"message": "again?"})
            assert "action=accept" in elicited.content[0].text
    finally:
        server.stop()
        subprocess.run(["pkill", "-f", f"conformance_server.py --sse {port}"], check=False)
