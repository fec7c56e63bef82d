"""@modelcontextprotocol/server-everything (streamableHttp mode) behind the relay: every tool
it lists is callable, including sampling, elicitation, roots and progress, which need
server-to-client requests and notifications to cross the relay both ways."""

import pytest
from helpers.host import through_relay

pytestmark = pytest.mark.anyio

# Tools whose result must be a success, with what its text must contain.
EXPECTED = {
    "echo": "relay",
    "get-sum": "5",
    "trigger-sampling-request": "sampled through the relay",
    "trigger-elicitation-request": "accept",
    "get-roots-list": "relay-root",
}

ARGUMENTS = {
    "echo": {"message": "relay"},
    "get-sum": {"a": 2, "b": 3},
    "trigger-long-running-operation": {"duration": 1, "steps": 3},
    "trigger-sampling-request": {"prompt": "hello", "maxTokens": 10},
}


def sample_arguments(tool) -> dict:
    """Arguments for a tool from its schema: defaults, first enum values, plain samples."""
    if tool.name in ARGUMENTS:
        return ARGUMENTS[tool.name]
    schema = tool.input_schema or {}
    properties = schema.get("properties", {})
    arguments = {}
    for name in schema.get("required", []):
        prop = properties.get(name, {})
        if "default" in prop:
            arguments[name] = prop["default"]
        elif "enum" in prop:
            arguments[name] = prop["enum"][0]
        else:
            arguments[name] = {"string": "relay", "integer": 1, "number": 1, "boolean": False}.get(prop.get("type"), "relay")
    return arguments


async def test_every_tool_is_callable_through_the_relay(everything_server):
    async with through_relay(everything_server.url) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        names = {tool.name for tool in tools}
        assert set(EXPECTED) <= names, f"server-everything offered {sorted(names)}"
        called = []
        for tool in tools:
            progress = []

            async def on_progress(value, total, message, progress=progress):
                progress.append(value)

            result = await session.call_tool(tool.name, sample_arguments(tool), progress_callback=on_progress)
            text = " ".join(getattr(block, "text", "") or "" for block in result.content)
            if tool.name in EXPECTED:
                assert not result.is_error, f"{tool.name}: {text}"
                assert EXPECTED[tool.name] in text, f"{tool.name}: {text}"
            if tool.name == "trigger-long-running-operation":
                assert not result.is_error, text
                assert len(progress) == 3 and progress == sorted(progress), progress
            called.append(tool.name)
        assert len(called) == len(tools)


async def test_resources_and_prompts_pass_through(everything_server):
    async with through_relay(everything_server.url) as session:
        await session.initialize()
        resources = (await session.list_resources()).resources
        assert resources, "server-everything lists resources"
        read = await session.read_resource(resources[0].uri)
        assert read.contents
        prompts = (await session.list_prompts()).prompts
        assert prompts


async def test_every_tool_is_callable_by_a_2026_07_28_host(everything_server):
    # A modern host in front of this handshake-era server: the relay runs initialize, and
    # the server's sampling, elicitation and roots requests reach the host as
    # input_required rounds that the host answers by retrying.
    from helpers.host import accept_sampling, accept_with_defaults, list_roots, relay_binary
    from mcp import StdioServerParameters
    from mcp.client import Client

    params = StdioServerParameters(command=relay_binary(), args=[everything_server.url, "--log-level", "warn"])
    async with Client(
        params,
        mode="2026-07-28",
        sampling_callback=accept_sampling,
        elicitation_callback=accept_with_defaults,
        list_roots_callback=list_roots,
        cache=None,
    ) as client:
        tools = (await client.list_tools()).tools
        names = {tool.name for tool in tools}
        assert set(EXPECTED) <= names, f"server-everything offered {sorted(names)}"
        for tool in tools:
            result = await client.call_tool(tool.name, sample_arguments(tool))
            text = " ".join(getattr(block, "text", "") or "" for block in result.content)
            if tool.name in EXPECTED:
                assert not result.is_error, f"{tool.name}: {text}"
                assert EXPECTED[tool.name] in text, f"{tool.name}: {text}"
