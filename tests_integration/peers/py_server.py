"""A Python SDK (mcp 2.3.0) Streamable HTTP server, the upstream behind the relay.

Usage: python py_server.py PORT [--json]   (--json: JSON responses instead of SSE)
"""

import sys

from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel

server = MCPServer("py-sdk-fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Reports progress three times, then answers after `seconds`."""
    for step in range(3):
        await ctx.report_progress(step + 1, 3, f"step {step + 1}")
        await anyio.sleep(seconds / 3)
    return "done"


@server.tool()
def shout(text: str) -> str:
    """Upper-cases text (non-ASCII and separators included)."""
    return text.upper()


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Asks the user's name (an elicitation: a server request in the handshake era, an
    input_required round in 2026-07-28), then greets them."""
    return f"hello {who.name}"


if __name__ == "__main__":
    port = int(sys.argv[1])
    server.run("streamable-http", host="127.0.0.1", port=port, json_response="--json" in sys.argv)
