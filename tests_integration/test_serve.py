"""`mcp-stdio serve` publishing the TypeScript @modelcontextprotocol/server-everything (its
stdio transport) over Streamable HTTP, driven by the Python SDK client (mcp 2.3.0) in
legacy mode: every tool, sampling, elicitation and roots round trips included; and the
relay in front of serve, so that both halves of the project talk to each other."""

import pytest
from helpers.paths import NODE_BIN, NPM_BIN
from helpers.processes import node_env, start_serve, stop_serve
from helpers.host import accept_sampling, accept_with_defaults, list_roots, through_relay
from mcp.client import Client
from test_server_everything import EXPECTED, sample_arguments

pytestmark = pytest.mark.anyio


@pytest.fixture
def served_everything():
    process, url = start_serve([str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), "stdio"], env=node_env())
    yield url
    assert stop_serve(process) == 0


async def test_every_tool_of_server_everything_through_serve(served_everything):
    async with Client(
        served_everything,
        mode="legacy",
        sampling_callback=accept_sampling,
        elicitation_callback=accept_with_defaults,
        list_roots_callback=list_roots,
        cache=None,
    ) as client:
        tools = (await client.list_tools()).tools
        names = {tool.name for tool in tools}
        assert set(EXPECTED) <= names, sorted(names)
        for tool in tools:
            result = await client.call_tool(tool.name, sample_arguments(tool))
            text = " ".join(getattr(block, "text", "") or "" for block in result.content)
            if tool.name in EXPECTED:
                assert not result.is_error, f"{tool.name}: {text}"
                assert EXPECTED[tool.name] in text, f"{tool.name}: {text}"
        resources = (await client.list_resources()).resources
        assert (await client.read_resource(resources[0].uri)).contents


async def test_the_relay_in_front_of_serve(served_everything):
    # A stdio host → mcp-stdio relay → HTTP → mcp-stdio serve → stdio server.
    async with through_relay(served_everything) as session:
        await session.initialize()
        result = await session.call_tool("echo", {"message": "both halves"})
        assert "both halves" in result.content[0].text
        sampled = await session.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
        assert "sampled through the relay" in sampled.content[0].text
