"""Enterprise-managed authorization (SEP-990) end to end with a real identity provider: the
npm package oidc-provider (OpenID Certified) is the organisation's IdP, where the relay logs
the user in with the OpenID Connect code flow (PKCE, nonce) and then exchanges the ID token
for an ID-JAG. oidc-provider has no RFC 8693 token exchange, so peers/oidc_enterprise.mjs
registers one as an extension grant in it (test-side, documented there), and the MCP
server's authorization server (which takes the ID-JAG with the JWT bearer grant and issues
JWT access tokens) is test-side too. The MCP server is the real `mcp-stdio serve
--oauth-issuer` checking those tokens, and the host is the Python SDK."""

import os
import shutil
import subprocess
import sys

import anyio
from helpers.host import relay_binary, through_relay
from helpers.paths import BROWSER, NODE_BIN, PEER_SCRIPTS, PEERS
from helpers.processes import free_port, node_env, wait_listening

AS_SECRET = "xaa-secret-" + "s" * 24


def serve_behind(issuer: str, port: int) -> subprocess.Popen:
    """`serve` with a Python SDK server, checking the authorization server's JWTs."""
    serve = subprocess.Popen(
        [relay_binary(), "serve", "--port", str(port), "--oauth-issuer", issuer, "--oauth-audience",
         f"http://127.0.0.1:{port}/mcp", "--oauth-scope", "mcp:tools", "--", sys.executable, str(PEER_SCRIPTS / "pid_server.py")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_listening(port, serve)
    return serve


def test_one_idp_login_serves_two_servers_of_the_organisation_through_id_jags(tmp_path):
    ports, callback_port = [free_port(), free_port()], free_port()
    servers = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    script = PEERS / "oidc_enterprise.mjs"
    shutil.copy(PEER_SCRIPTS / "oidc_enterprise.mjs", script)
    log = tmp_path / "enterprise.log"
    log.touch()
    world = subprocess.Popen(
        [str(NODE_BIN / "node"), str(script), ",".join(servers), f"http://127.0.0.1:{callback_port}/callback", AS_SECRET, str(log)],
        env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    serves = []
    try:
        idp_port, as_port = world.stdout.readline().split()
        idp, issuer = f"http://127.0.0.1:{idp_port}", f"http://127.0.0.1:{as_port}"
        serves = [serve_behind(issuer, port) for port in ports]
        state = str(tmp_path / "state")
        env = {"XDG_STATE_HOME": state, "HOME": state, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
               "MCP_OAUTH_CLIENT_SECRET": AS_SECRET}
        flags = ["--idp-issuer", idp, "--idp-client-id", "mcp-stdio", "--client-id", "xaa-client",
                 "--callback-port", str(callback_port), "--token-store", "file", "--oauth-timeout", "30"]

        async def host(url: str, *extra: str, browser: bool) -> str:
            run_env = {**env, "BROWSER": f"{sys.executable} {BROWSER}"} if browser else env
            async with through_relay(url, *flags, *extra, env=run_env) as session:
                await session.initialize()
                assert [tool.name for tool in (await session.list_tools()).tools] == ["whoami"]
                result = await session.call_tool("whoami", {})
                return result.content[0].text

        # The first relay may open a browser: it logs in at the IdP, exchanges, and uses.
        assert anyio.run(lambda: host(servers[0], "--oauth", browser=True)).isdigit()
        # A relay for the organisation's other server, with no browser at all: the IdP
        # login kept in the store serves it.
        assert anyio.run(lambda: host(servers[1], browser=False)).isdigit()
        events = log.read_text().splitlines()
        assert events.count("idp_login") == 1, events
        assert events.count("grant authorization_code") == 1, events
        for server in servers:
            assert events.count(f"exchanged alice audience={issuer} resource={server}") == 1, events
        assert events.count("as_issued alice") == 2, events
        assert not [e for e in events if "refused" in e or "error" in e], events

        status = subprocess.run([relay_binary(), "status", "--token-store", "file"], env={**os.environ, **env},
                                capture_output=True, text=True, timeout=30)
        assert f"identity provider {idp} client=mcp-stdio" in status.stdout, status.stdout
        assert "eyJ" not in status.stdout + status.stderr
    finally:
        for serve in serves:
            serve.terminate()
            serve.wait(timeout=15)
        world.terminate()
        world.wait(timeout=10)
