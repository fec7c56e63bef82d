"""fastmcp 4.1.6's own HTTP server (what Python authors publish): one tool, one resource and
one prompt, on 127.0.0.1 at the port given, Streamable HTTP at /mcp."""

import sys

from fastmcp import FastMCP

server = FastMCP("fastmcp-peer")


@server.tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.resource("note://greeting")
def greeting() -> str:
    """A fixed note."""
    return "hello from fastmcp"


@server.prompt
def review(subject: str) -> str:
    """Asks for a review of the subject."""
    return f"Please review {subject} carefully."


if __name__ == "__main__":
    server.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False, log_level="warning")
