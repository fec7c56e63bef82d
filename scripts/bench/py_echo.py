"""The Python SDK's (mcp 2.3.0) Streamable HTTP server with one `echo` tool, the upstream the
relay's leanness is measured against (`bench.py --upstream python`).

Usage: python py_echo.py PORT
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-echo")


@server.tool()
def echo(i: int) -> int:
    """Returns its argument."""
    return i


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), json_response=True)
