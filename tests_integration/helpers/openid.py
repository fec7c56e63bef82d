"""serve in front of a real OpenID Provider (oidc-provider running peers/oidc_world.mjs: dynamic
registration and the code flow), with a browser stand-in that approves: the world the relay's,
`login`'s and `check --oauth`'s real-provider tests share."""

import contextlib
import dataclasses
import pathlib
import shutil
import subprocess
import sys

from helpers.paths import BROWSER, NODE_BIN, PEER_SCRIPTS, PEERS, relay_binary
from helpers.processes import free_port, node_env, wait_listening


@dataclasses.dataclass
class OpenIdWorld:
    resource: str
    issuer: str
    log: pathlib.Path
    """The provider's events, one per line ("registered", "grant authorization_code", …)."""
    env: dict
    """BROWSER and a fresh token store for the commands under test."""


@contextlib.contextmanager
def serve_behind_openid_provider(tmp_path: pathlib.Path):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    script = PEERS / "oidc_world.mjs"
    shutil.copy(PEER_SCRIPTS / "oidc_world.mjs", script)
    log = tmp_path / "provider.log"
    log.touch()
    provider = subprocess.Popen(
        [str(NODE_BIN / "node"), str(script), str(log), resource], env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    serve = None
    try:
        issuer = f"http://127.0.0.1:{provider.stdout.readline().split()[0]}"
        serve = subprocess.Popen(
            [relay_binary(), "serve", "--port", str(port), "--oauth-issuer", issuer, "--oauth-audience", resource,
             "--oauth-scope", "mcp:tools", "--", sys.executable, str(PEER_SCRIPTS / "pid_server.py")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_listening(port, serve)
        state = str(tmp_path / "state")
        env = {"BROWSER": f"{sys.executable} {BROWSER}", "XDG_STATE_HOME": state, "HOME": state,
               "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}
        yield OpenIdWorld(resource=resource, issuer=issuer, log=log, env=env)
    finally:
        if serve:
            serve.terminate()
            serve.wait(timeout=15)
        provider.terminate()
        provider.wait(timeout=10)
