"""The client under test for the conformance suite's `auth/*` scenarios: a Python SDK client
that reaches the scenario's protected server only through `mcp-stdio URL --oauth`, with a
`$BROWSER` stand-in that follows the authorization redirect.

The suite runs `python -m clients.conformance_auth_client <server-url>` with MCP_CONFORMANCE_SCENARIO
and, for scenarios with pre-registered clients, MCP_CONFORMANCE_CONTEXT (JSON) set.
"""

import json
import os
import sys
import tempfile

import anyio

from helpers.host import through_relay
from helpers.paths import BROWSER


async def main(url: str, scenario: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    state = tempfile.mkdtemp(prefix="mcp-stdio-auth-")
    env = {
        "BROWSER": f"{sys.executable} {BROWSER}",
        "XDG_STATE_HOME": state,
        "HOME": state,  # no real logins, no Python tool's token file
    }
    if context.get("client_id"):
        env["MCP_OAUTH_CLIENT_ID"] = context["client_id"]
    if context.get("client_secret"):
        env["MCP_OAUTH_CLIENT_SECRET"] = context["client_secret"]
    args = ["--oauth", "--oauth-timeout", "30"]
    if context.get("private_key_pem"):
        key = os.path.join(state, "client-key.pem")
        with open(key, "w") as f:
            f.write(context["private_key_pem"])
        args += ["--client-key", key]
    if context.get("valid_jwt"):
        # Workload identity (SEP-1933): the workload's JWT in a file, as Kubernetes or a CI
        # provider would leave it.
        path = os.path.join(state, "workload-token")
        with open(path, "w") as f:
            f.write(context["valid_jwt"])
        args += ["--workload-token-file", path]
    if context.get("idp_issuer"):
        # Enterprise-managed authorization (SEP-990): the organisation's identity provider,
        # and an ID token it issued (the scenario's; a browser login there otherwise).
        path = os.path.join(state, "id-token")
        with open(path, "w") as f:
            f.write(context["idp_id_token"])
        args += ["--idp-issuer", context["idp_issuer"], "--idp-client-id", context["idp_client_id"], "--idp-id-token-file", path]
    if not context.get("client_id"):
        # Used where the authorization server accepts Client ID Metadata Documents.
        args += ["--client-metadata-url", "https://conformance-test.local/client-metadata.json"]
    async with through_relay(url, *args, env=env) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        if any(tool.name == "test-tool" for tool in tools):
            try:
                await session.call_tool("test-tool", {})
            except Exception as error:  # scope-retry-limit ends in an error by design
                print(f"scenario {scenario}: tools/call failed: {error}", file=sys.stderr)
        print(f"scenario {scenario}: tools {[tool.name for tool in tools]}", file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "auth/metadata-default"))
