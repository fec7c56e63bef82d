"""The client under test for the conformance suite's 2026-07-28 client requirements
(`@modelcontextprotocol/conformance@0.2.0-alpha.12 client --requirements 2026-07-28`): a
Python SDK client that reaches each scenario's server only through `mcp-stdio URL`.

MCP_STDIO_HOST_MODE picks the host's era: `2026-07-28` (a modern host: the relay passes its
requests through) or `legacy` (a handshake-era host: the relay's translation is what the
suite judges). The suite sets MCP_CONFORMANCE_SCENARIO and, for some scenarios,
MCP_CONFORMANCE_CONTEXT (JSON).
"""

import json
import os
import sys
import tempfile

import anyio
from mcp import StdioServerParameters, types
from mcp.client import Client

from helpers.host import accept_sampling, accept_with_defaults, list_roots, relay_binary
from helpers.paths import BROWSER


def relay(url: str, scenario: str, context: dict) -> StdioServerParameters:
    args = [url, "--log-level", "warn"]
    env = {}
    if scenario.startswith("auth/"):
        state = tempfile.mkdtemp(prefix="mcp-stdio-auth-")
        env = {
            "BROWSER": f"{sys.executable} {BROWSER}",
            "XDG_STATE_HOME": state,
            "HOME": state,
        }
        args += ["--oauth", "--oauth-timeout", "30"]
        if context.get("client_id"):
            env["MCP_OAUTH_CLIENT_ID"] = context["client_id"]
        else:
            args += ["--client-metadata-url", "https://conformance-test.local/client-metadata.json"]
        if context.get("client_secret"):
            env["MCP_OAUTH_CLIENT_SECRET"] = context["client_secret"]
    return StdioServerParameters(command=relay_binary(), args=args, env=env or None)


async def exercise(client: Client, scenario: str, context: dict) -> None:
    tools = (await client.list_tools()).tools
    names = [tool.name for tool in tools]
    print(f"scenario {scenario}: tools {names}", file=sys.stderr)
    calls = context.get("toolCalls")
    if calls:
        for call in calls:
            await client.call_tool(call["name"], call.get("arguments", {}))
        return
    if scenario == "tools_call":
        result = await client.call_tool("add_numbers", {"a": 2, "b": 3})
        assert "5" in result.content[0].text, result
    elif scenario == "sep-2322-client-request-state":
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "test_mrtr_echo_state", {})
            group.start_soon(client.call_tool, "test_mrtr_unrelated", {})
        await client.call_tool("test_mrtr_no_state", {})
        await client.call_tool("test_mrtr_no_result_type", {})
    elif scenario == "json-schema-2020-12-preservation":
        # Echo the focal tool's inputSchema as received: whatever the relay and the SDK
        # changed in it shows.
        focal = next(tool for tool in tools if tool.name == "json_schema_2020_12_tool")
        await client.call_tool("json_schema_echo", {"schema": focal.input_schema})
    elif scenario in ("http-standard-headers", "http-invalid-tool-headers", "elicitation-sep1034-client-defaults", "sse-retry") or scenario.startswith("auth/"):
        for tool in tools:
            try:
                await client.call_tool(tool.name, {"region": "us-west1"} if "region" in str(tool.input_schema) else {})
            except Exception as error:  # e.g. auth/scope-retry-limit ends in an error by design
                print(f"scenario {scenario}: {tool.name} failed: {error}", file=sys.stderr)
    if scenario == "http-standard-headers":
        resources = (await client.list_resources()).resources
        if resources:
            await client.read_resource(resources[0].uri)
        prompts = (await client.list_prompts()).prompts
        if prompts:
            await client.get_prompt(prompts[0].name, {})


async def main(url: str, scenario: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    mode = os.environ.get("MCP_STDIO_HOST_MODE", "2026-07-28")
    async with Client(
        relay(url, scenario, context),
        mode=mode,
        elicitation_callback=accept_with_defaults,
        sampling_callback=accept_sampling,
        list_roots_callback=list_roots,
        cache=None,
    ) as client:
        await exercise(client, scenario, context)


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "tools_call"))
