"""A stdio MCP host made of the Python SDK client: it spawns the relay under test, the way
Claude Desktop or an IDE would, and talks to it over stdin/stdout."""

import sys
from contextlib import asynccontextmanager

from mcp import ClientSession, StdioServerParameters, stdio_client, types

from helpers.paths import relay_binary


async def accept_sampling(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled through the relay"),
        model="fake-model",
        stop_reason="endTurn",
    )


async def accept_with_defaults(context, params) -> types.ElicitResult:
    """Accepts an elicitation, filling every field that has a default (SEP-1034)."""
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {name: prop["default"] for name, prop in properties.items() if "default" in prop}
    for name in schema.get("required", []) if isinstance(schema, dict) else []:
        if name not in content:
            kind = properties.get(name, {}).get("type")
            content[name] = {"string": "relay", "integer": 1, "number": 1.5, "boolean": True}.get(kind, "relay")
    return types.ElicitResult(action="accept", content=content)


async def list_roots(context) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/relay-root", name="relay-root")])


@asynccontextmanager
async def through_relay(url: str, *extra_args: str, env: dict | None = None, **session_kwargs):
    """A ClientSession whose server is `mcp-stdio URL`; not yet initialized. `env` is added to
    the SDK's default environment for the relay process."""
    params = StdioServerParameters(command=relay_binary(), args=[url, "--log-level", "warn", *extra_args], env=env)
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        session_kwargs.setdefault("sampling_callback", accept_sampling)
        session_kwargs.setdefault("elicitation_callback", accept_with_defaults)
        session_kwargs.setdefault("list_roots_callback", list_roots)
        async with ClientSession(read, write, **session_kwargs) as session:
            yield session
