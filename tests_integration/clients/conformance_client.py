"""The client under test for the official conformance suite's client scenarios: a Python SDK
client (legacy handshake) that reaches the scenario's server only through `mcp-stdio URL`.

The suite runs `python -m clients.conformance_client <server-url>` with MCP_CONFORMANCE_SCENARIO set.
"""

import os
import sys

import anyio

from helpers.host import through_relay


async def main(url: str, scenario: str) -> None:
    async with through_relay(url) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        names = [tool.name for tool in tools]
        if scenario == "tools_call":
            result = await session.call_tool("add_numbers", {"a": 2, "b": 3})
            assert "5" in result.content[0].text, result
        elif scenario == "elicitation-sep1034-client-defaults":
            await session.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            result = await session.call_tool("test_reconnection", {})
            assert "successfully" in result.content[0].text, result
        print(f"scenario {scenario}: tools {names}", file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))
