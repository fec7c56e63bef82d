"""`serve --oauth-issuer` in front of a real identity provider nobody here wrote: the npm
package oidc-provider (OpenID Certified) issuing JWT access tokens with an audience through
the client credentials grant (peers/oidc_issuer.mjs). Two callers are two principals with
two children; one's session id is useless with the other's token; a token for another
audience, a tampered signature, an `alg: none` copy and an expired token are refused with 401
and the reason; a key rotation at the provider is picked up without a restart; the Python
SDK client (mcp 2.3.0) is the caller. And our own relay logs in at the provider
(peers/oidc_world.mjs: registration, the code flow) from serve's 401 and metadata alone, and
calls serve with the token it got."""

import base64
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from helpers.host import relay_binary, through_relay
from helpers.openid import serve_behind_openid_provider
from helpers.paths import NODE_BIN, PEER_SCRIPTS, PEERS
from helpers.processes import node_env, start_serve, stop_serve

pytestmark = pytest.mark.anyio

AUDIENCE = "http://127.0.0.1/team-mcp"
ELSEWHERE = "http://elsewhere.example/mcp"


def start_provider(port: int = 0) -> tuple[subprocess.Popen, int]:
    # Run from the peers folder, so `import "oidc-provider"` resolves to its node_modules.
    script = PEERS / "oidc_issuer.mjs"
    shutil.copy(PEER_SCRIPTS / "oidc_issuer.mjs", script)
    provider = subprocess.Popen(
        [str(NODE_BIN / "node"), str(script), AUDIENCE, str(port)], env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    return provider, int(provider.stdout.readline().strip())


class Identity:
    def __init__(self):
        self.provider, self.port = start_provider()
        self.issuer = f"http://127.0.0.1:{self.port}"

    def rotate(self):
        """The provider restarts on its port with a new signing key."""
        self.provider.terminate()
        self.provider.wait(timeout=10)
        self.provider, _ = start_provider(self.port)


@pytest.fixture
def identity():
    world = Identity()
    serve, url = start_serve(
        [sys.executable, str(PEER_SCRIPTS / "pid_server.py")],
        flags=("--oauth-issuer", world.issuer, "--oauth-audience", AUDIENCE, "--oauth-scope", "mcp:tools",
               "--oauth-leeway", "0", "--oauth-jwks-refetch", "1",
               # oidc-provider marks its JWT access tokens `typ: at+jwt` (RFC 9068).
               "--oauth-require-at-jwt"),
    )
    try:
        yield world.issuer, url, world
    finally:
        stop_serve(serve)
        world.provider.terminate()
        world.provider.wait(timeout=10)


def token_for(issuer: str, client: str, resource: str = AUDIENCE) -> str:
    secret = f"{client}-secret-{'x' * 32}"
    request = urllib.request.Request(
        f"{issuer}/token",
        data=urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "mcp:tools", "resource": resource}).encode(),
        headers={"Authorization": "Basic " + base64.b64encode(f"{client}:{secret}".encode()).decode()},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.load(response)
    token = answer["access_token"]
    assert token.count(".") == 2, "the provider issued a JWT"
    return token


async def whoami(url: str, token: str) -> str:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None) as client:
        result = await client.call_tool("whoami", {})
        assert not result.is_error, result
        return result.content[0].text


def initialize(url: str, token: str, session: str | None = None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    if session:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return httpx2.post(url, json=body, headers=headers, timeout=30)


async def test_two_users_two_children_and_sessions_stay_with_their_owner(identity):
    issuer, url, _ = identity
    alice, bob = token_for(issuer, "alice"), token_for(issuer, "bob")
    alice_pid = await whoami(url, alice)
    assert await whoami(url, alice) == alice_pid, "one pooled child per principal"
    bob_pid = await whoami(url, bob)
    assert bob_pid != alice_pid, "two principals, two children"

    created = initialize(url, alice)
    assert created.status_code == 200, created.text
    session = created.headers["mcp-session-id"]
    assert initialize(url, alice, session).status_code == 200
    stolen = initialize(url, bob, session)
    assert stolen.status_code == 404, stolen.text


def test_bad_tokens_from_the_same_provider_are_refused(identity):
    issuer, url, _ = identity
    good = token_for(issuer, "alice")
    header, payload, signature = good.split(".")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    none_header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "at+jwt"}).encode()).rstrip(b"=").decode()
    cases = {
        "wrong_audience": token_for(issuer, "alice", ELSEWHERE),
        "bad_signature": f"{header}.{payload}.{flipped}",
        "malformed": f"{none_header}.{payload}.",
    }
    for outcome, token in cases.items():
        answer = initialize(url, token)
        assert answer.status_code == 401, (outcome, answer.text)
        challenge = answer.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge and f'error_description="{outcome}"' in challenge, (outcome, challenge)
    # The channel is alive: the good token still works.
    assert initialize(url, good).status_code == 200
    metadata = httpx2.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=10).json()
    assert metadata["authorization_servers"] == [issuer]
    assert metadata["scopes_supported"] == ["mcp:tools"]


def until(check, what: str, deadline_s: float = 15.0):
    deadline = time.monotonic() + deadline_s
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_an_expired_token_is_refused_and_a_rotated_key_is_picked_up(identity):
    issuer, url, world = identity
    short = token_for(issuer, "carol")  # lives one second
    assert initialize(url, short).status_code == 200
    expired = until(lambda: (a := initialize(url, short)).status_code == 401 and a, "the expired token stayed accepted")
    assert 'error_description="expired"' in expired.headers["www-authenticate"]

    before = token_for(issuer, "alice")
    assert initialize(url, before).status_code == 200
    world.rotate()
    after = token_for(issuer, "alice")
    assert json.loads(base64.urlsafe_b64decode(after.split(".")[0] + "==")).get("kid") != json.loads(
        base64.urlsafe_b64decode(before.split(".")[0] + "=="))["kid"], "the provider rotated its key"
    until(lambda: initialize(url, after).status_code == 200, "the rotated key was never picked up")


async def test_our_relay_logs_in_at_the_provider_and_calls_serve(tmp_path):
    """Both halves of the project with a real provider between them: the relay reads serve's
    401 and protected resource metadata, registers at oidc-provider, logs in (the browser
    stand-in approves), and calls serve with the JWT it got; serve checks it."""
    with serve_behind_openid_provider(tmp_path) as world:
        async with through_relay(world.resource, "--oauth", "--oauth-timeout", "30", env=world.env) as session:
            await session.initialize()
            result = await session.call_tool("whoami", {})
            assert not result.is_error, result
            assert result.content[0].text.isdigit(), result
        events = world.log.read_text().splitlines()
        assert "registered" in events and "grant authorization_code" in events, events
        assert not [e for e in events if "error" in e], events
