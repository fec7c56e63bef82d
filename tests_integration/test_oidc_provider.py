"""The relay against a real OpenID Provider nobody here wrote: the npm package oidc-provider
(OpenID Certified), configured with Dynamic Client Registration, PKCE, resource indicators
(JWT access tokens whose audience the protected MCP server checks), refresh-token rotation and
revocation (oidc_world.mjs). A Python SDK host uses the protected server through
`mcp-stdio URL --oauth`; the `$BROWSER` stand-in follows the login and consent redirects."""

import os
import shutil
import subprocess
import sys
import tempfile

import anyio
import pytest
from helpers.paths import BROWSER, NODE_BIN, PEER_SCRIPTS, PEERS
from helpers.processes import node_env
from helpers.host import relay_binary, through_relay


@pytest.fixture
def oidc_world(tmp_path):
    # Run from the peers folder, so `import "oidc-provider"` resolves to its node_modules.
    script = PEERS / "oidc_world.mjs"
    shutil.copy(PEER_SCRIPTS / "oidc_world.mjs", script)
    log = tmp_path / "provider.log"
    log.touch()
    process = subprocess.Popen(
        [str(NODE_BIN / "node"), str(script), str(log)], env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        provider_port, mcp_port = process.stdout.readline().split()
        yield f"http://127.0.0.1:{mcp_port}/mcp", log
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_login_use_refresh_rotation_and_revocation_with_a_certified_provider(oidc_world, tmp_path):
    url, log = oidc_world
    state = str(tmp_path / "state")
    env = {
        "BROWSER": f"{sys.executable} {BROWSER}",
        "XDG_STATE_HOME": state,
        "HOME": state,
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
    }

    async def host() -> str:
        async with through_relay(url, "--oauth", "--oauth-timeout", "30", env=env) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            assert [tool.name for tool in tools] == ["whoami"]
            result = await session.call_tool("whoami", {})
            return result.content[0].text

    # Access tokens live 2 s and the refresh leeway is 60 s: every request after the login
    # refreshes first, and rotation invalidates each refresh token once used.
    assert anyio.run(host) == "user-1"
    events = log.read_text().splitlines()
    assert "registered" in events, events
    assert "grant authorization_code" in events, events
    assert events.count("grant refresh_token") >= 2, events
    assert not [e for e in events if "error" in e], events

    logout = subprocess.run(
        [relay_binary(), "logout", url], env={**os.environ, **env}, capture_output=True, text=True, timeout=30
    )
    assert logout.returncode == 0, logout.stderr
    assert "1 revoked" in logout.stderr, logout.stderr
    assert "revoked" in log.read_text().splitlines()
