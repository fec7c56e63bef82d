"""A Python SDK (mcp 2.3.0) stdio server with one tool, `whoami`, answering its process id:
which child of `serve` a caller reached."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("pid-fixture")


@server.tool()
def whoami() -> str:
    """This server process's id."""
    return str(os.getpid())


if __name__ == "__main__":
    server.run("stdio")
