"""The relay between the Python SDK (mcp 2.3.0) client and its dual-era Streamable HTTP
server, with the client in each of its modes: `auto` (probe, then whatever the relay
answers), `legacy` (the initialize handshake: the relay translates to 2026-07-28 upstream)
and `2026-07-28` (a modern host: the relay passes its requests through)."""

import pytest
from helpers.host import accept_with_defaults, relay_binary
from mcp import StdioServerParameters, types
from mcp.client import Client

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy", "2026-07-28"]


async def elicit_name(context, params) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def relay(url: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=relay_binary(), args=[url, "--log-level", "info", *extra])


@pytest.mark.parametrize("mode", MODES)
async def test_each_client_mode_lists_calls_and_elicits(python_sdk_server, mode):
    async with Client(relay(python_sdk_server.url), mode=mode, elicitation_callback=elicit_name) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"add", "greet"} <= names
        result = await client.call_tool("add", {"a": 20, "b": 22})
        assert result.content[0].text == "42"
        greeting = await client.call_tool("greet", {})
        assert greeting.content[0].text == "hello Ada", greeting
        negotiated = client.session.protocol_version
        if mode == "legacy":
            assert negotiated < "2026-07-28"
        else:
            assert negotiated == "2026-07-28", negotiated


async def test_the_relay_speaks_2026_07_28_upstream_for_a_legacy_host(python_sdk_server, tmp_path):
    # A legacy host, a dual-era server: the probe finds the modern era (the relay's log says
    # so), and the host still gets a handshake-era session.
    log = tmp_path / "relay.log"
    wrapped = StdioServerParameters(
        command="sh",
        args=["-c", f'exec "$0" "$@" 2>>{log}', relay_binary(), python_sdk_server.url, "--log-level", "info"],
    )
    async with Client(wrapped, mode="legacy", elicitation_callback=accept_with_defaults) as client:
        assert client.session.initialize_result is not None
        await client.list_tools()
    text = log.read_text()
    assert "upstream protocol era: modern (detected)" in text, text[-2000:]
    assert "answered the host's initialize" in text
