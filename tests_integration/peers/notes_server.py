"""A Python SDK (mcp 2.3.0) stdio server with three tools whose annotations a policy reads:
`read_note` (read-only), `write_note` (no hints: the MCP defaults say it may change
things), `delete_note` (destructive)."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
NOTES: dict[str, str] = {"todo": "buy milk"}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """A note's text."""
    return NOTES.get(name, "")


@server.tool()
def write_note(name: str, text: str) -> str:
    """Writes a note."""
    NOTES[name] = text
    return "written"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_note(name: str) -> str:
    """Deletes a note."""
    NOTES.pop(name, None)
    return "deleted"


if __name__ == "__main__":
    server.run("stdio")
