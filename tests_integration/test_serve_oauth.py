"""`serve --enable-oauth`, serve as its own authorization server, against clients nobody
here wrote and our own: the official conformance suite's authorization-server scenarios
(metadata, the code grant with PKCE through the consent page), our relay and `mcp-stdio
login` end to end (log in, call, refresh, log out with revocation, log in again), and grants
that outlive a restart on a real PostgreSQL server (`scripts/test-all` starts one)."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from clients.browser import StopAt, open_and_consent
from helpers.conformance import NEXT_SUITE, checks_of
from helpers.host import relay_binary, through_relay
from helpers.paths import BROWSER, NODE_BIN, PEER_SCRIPTS
from helpers.processes import free_port, node_env, wait_listening

pytestmark = pytest.mark.anyio


def start_as(port: int, store: str, *flags: str) -> subprocess.Popen:
    serve = subprocess.Popen(
        [relay_binary(), "serve", "--port", str(port), "--enable-oauth", "--dev-user", "alice", "--oauth-store", store,
         "--log-level", "debug", *flags, "--", sys.executable, str(PEER_SCRIPTS / "pid_server.py")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    wait_listening(port, serve)
    return serve


def stop(serve: subprocess.Popen) -> str:
    serve.terminate()
    _, log = serve.communicate(timeout=15)
    return log


def register(issuer: str, redirect: str) -> str:
    request = urllib.request.Request(
        f"{issuer}/register", data=json.dumps({"redirect_uris": [redirect], "client_name": "conformance"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["client_id"]


def test_the_conformance_suite_s_authorization_server_scenarios_pass(tmp_path):
    port, callback = free_port(), free_port()
    serve = start_as(port, f"sqlite:{tmp_path / 'oauth.db'}")
    issuer = f"http://127.0.0.1:{port}"
    try:
        client_id = register(issuer, f"http://127.0.0.1:{callback}/callback")
        out = tmp_path / "out"
        suite = subprocess.Popen(
            [str(NODE_BIN / "node"), *NEXT_SUITE, "authorization", "--url", issuer, "--client-id", client_id,
             "--port", str(callback), "--resource", f"{issuer}/mcp", "-o", str(out)],
            env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        report, authorize = [], None
        # The suite prints the authorization URL for a user to open, then that its callback
        # server listens: the scripted browser opens the URL and presses Allow on the consent
        # page, and the redirect reaches the suite.
        for line in suite.stdout:
            report.append(line)
            if line.startswith(f"{issuer}/authorize?"):
                authorize = line.strip()
            if authorize and "Callback server started" in line:
                open_and_consent(authorize)
                break
        rest, _ = suite.communicate(timeout=60)
        report = "".join(report) + rest
        checks = checks_of(list(out.rglob("checks.json")))
        by_id = {c["id"]: c["status"] for c in checks}
        assert by_id.get("authorization-server-metadata") == "SUCCESS", report
        assert by_id.get("authorization-code-grant") == "SUCCESS", report
        assert not [c for c in checks if c["status"] == "FAILURE"], report
        # The one warning: Client ID Metadata Documents are not offered (not built yet).
        assert {c["id"] for c in checks if c["status"] == "WARNING"} <= {"authorization-server-metadata-cimd"}, checks
    finally:
        stop(serve)


def cli_env(tmp_path) -> dict:
    """Our CLI with its own state folder (the token file: no keyring) and the scripted browser."""
    state = str(tmp_path / "state")
    return {"BROWSER": f"{sys.executable} {BROWSER}", "XDG_STATE_HOME": state, "HOME": state,
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}


def run_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([relay_binary(), *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


async def test_our_relay_logs_in_refreshes_logs_out_and_logs_in_again(tmp_path):
    port = free_port()
    serve = start_as(port, f"sqlite:{tmp_path / 'oauth.db'}", "--access-token-ttl", "2")
    url = f"http://127.0.0.1:{port}/mcp"
    env = cli_env(tmp_path)
    try:
        login = run_cli("login", url, "--token-store", "file", env=env)
        assert login.returncode == 0, login.stderr
        async with through_relay(url, "--oauth", "--token-store", "file", env=env) as session:
            await session.initialize()
            result = await session.call_tool("whoami", {})
            assert not result.is_error and result.content[0].text.isdigit(), result
        first = run_cli("token", url, "--token-store", "file", env=env)
        assert first.returncode == 0, first.stderr
        time.sleep(2.5)  # the 2 s access token has expired: `token` must refresh it
        second = run_cli("token", url, "--token-store", "file", env=env)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() != first.stdout.strip()
        probe = urllib.request.Request(url, data=b"{}", headers={"Authorization": f"Bearer {second.stdout.strip()}",
                                                                "Content-Type": "application/json",
                                                                "Accept": "application/json, text/event-stream"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(probe, timeout=10)
        assert refused.value.code == 400, "the token is accepted (the body is the problem)"
        logout = run_cli("logout", url, "--token-store", "file", env=env)
        assert logout.returncode == 0 and "1 revoked" in logout.stderr + logout.stdout, logout.stderr + logout.stdout
        with pytest.raises(urllib.error.HTTPError) as revoked:
            urllib.request.urlopen(probe, timeout=10)
        assert revoked.value.code == 401
        again = run_cli("login", url, "--token-store", "file", env=env)
        assert again.returncode == 0, again.stderr
        async with through_relay(url, "--oauth", "--token-store", "file", env=env) as session:
            await session.initialize()
            assert not (await session.call_tool("whoami", {})).is_error
    finally:
        log = stop(serve)
    assert "outcome=\"grant_revoked\"" in log or "grant_revoked" in log, log[-3000:]
    for token in (first.stdout.strip(), second.stdout.strip()):
        assert token and token not in log


def postgres_database() -> str:
    url = os.environ.get("MCP_STDIO_TEST_POSTGRES")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("MCP_STDIO_TEST_POSTGRES is not set: scripts/test-all starts a PostgreSQL server")
        pytest.skip("set MCP_STDIO_TEST_POSTGRES (scripts/postgres start DIR) to run against PostgreSQL")
    name = "serve_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", url, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=30)
    return re.sub(r"/[^/?]*$", f"/{name}", url)


async def test_grants_outlive_a_restart_on_postgresql(tmp_path):
    store = postgres_database()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = cli_env(tmp_path)
    serve = start_as(port, store, "--access-token-ttl", "2")
    try:
        assert run_cli("login", url, "--token-store", "file", env=env).returncode == 0
    finally:
        stop(serve)
    serve = start_as(port, store, "--access-token-ttl", "2")
    try:
        time.sleep(2.5)  # expired: the refresh token from before the restart must work
        refreshed = run_cli("token", url, "--token-store", "file", env=env)
        assert refreshed.returncode == 0, refreshed.stderr
        async with through_relay(url, "--oauth", "--token-store", "file", env=env) as session:
            await session.initialize()
            assert not (await session.call_tool("whoami", {})).is_error
    finally:
        log = stop(serve)
    assert "postgres://127.0.0.1/" in log and "postgres@" not in log, log[:2000]


def sign_in_at_provider(authorize_url: str, callback: str, user: str, meanwhile=None, edit=None) -> tuple[str | None, str]:
    """The browser: the provider's login page (the user name typed in), then serve's consent
    page (Allow); where it ended (the client's callback URL) and the last page's text.
    `meanwhile()` runs while the login page is open; `edit(fields)` changes the consent
    form's fields before it is posted (an attacker's browser)."""
    from http.cookiejar import CookieJar

    from clients.browser import ConsentForm

    stop = StopAt(callback)
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), stop)
    with opener.open(authorize_url, timeout=30) as response:
        page, where = response.read().decode(), response.geturl()
    action = re.search(r'<form method="post" action="([^"]+)"', page).group(1)
    if meanwhile:
        meanwhile()
    request = urllib.request.Request(urllib.parse.urljoin(where, action), data=urllib.parse.urlencode({"login": user}).encode())
    try:
        with opener.open(request, timeout=30) as response:
            page, where = response.read().decode(), response.geturl()
    except urllib.error.HTTPError as refused:
        return None, refused.read().decode()
    form = ConsentForm()
    form.feed(page)
    assert form.action and form.approve, page
    fields = edit(form.fields) if edit else form.fields
    request = urllib.request.Request(urllib.parse.urljoin(where, form.action), data=urllib.parse.urlencode(fields + [form.approve]).encode())
    try:
        opener.open(request, timeout=30)
    except urllib.error.HTTPError as refused:
        if stop.reached is None:
            return None, refused.read().decode()
    return stop.reached, page


class LoginWorld:
    """oidc-provider with its login page, serve --login-oidc in front of pid_server.py, and
    one registered client whose authorization request (`query`) waits to be opened."""

    CALLBACK = "http://127.0.0.1:9/cb"

    def __init__(self, tmp_path, *serve_flags: str):
        import base64
        import hashlib

        port = free_port()
        self.secret = "login-secret-" + uuid.uuid4().hex
        self.provider = subprocess.Popen(
            [str(NODE_BIN / "node"), str(copy_peer("oidc_login.mjs")), f"http://127.0.0.1:{port}/login-callback", self.secret],
            env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        issuer = f"http://127.0.0.1:{self.provider.stdout.readline().strip()}"
        self.provider_issuer = issuer
        env = {**os.environ, "MCP_STDIO_LOGIN_CLIENT_ID": "mcp-serve", "MCP_STDIO_LOGIN_CLIENT_SECRET": self.secret}
        self.serve = subprocess.Popen(
            [relay_binary(), "serve", "--port", str(port), "--enable-oauth", "--oauth-store", f"sqlite:{tmp_path / 'o.db'}",
             "--login-oidc", issuer, *serve_flags, "--log-level", "debug", "--", sys.executable, str(PEER_SCRIPTS / "pid_server.py")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )
        wait_listening(port, self.serve)
        self.base = f"http://127.0.0.1:{port}"
        self.client_id = register(self.base, self.CALLBACK)
        self.verifier = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest()).rstrip(b"=").decode()
        query = urllib.parse.urlencode({"response_type": "code", "client_id": self.client_id, "redirect_uri": self.CALLBACK,
                                        "state": "s1", "code_challenge": challenge, "code_challenge_method": "S256"})
        self.authorize_url = f"{self.base}/authorize?{query}"

    def redeem(self, callback_url: str) -> tuple[str, str]:
        """The code from where the browser was sent, redeemed: (code, access token)."""
        code = urllib.parse.parse_qs(urllib.parse.urlparse(callback_url).query)["code"][0]
        form = urllib.parse.urlencode({"grant_type": "authorization_code", "client_id": self.client_id, "code": code,
                                       "redirect_uri": self.CALLBACK, "code_verifier": self.verifier}).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{self.base}/token", data=form), timeout=10) as response:
            return code, json.load(response)["access_token"]

    def stop(self) -> str:
        """Ends both; serve's log."""
        log = stop(self.serve)
        self.provider.terminate()
        self.provider.wait(timeout=10)
        return log


def test_users_sign_in_at_an_openid_provider(tmp_path):
    world = LoginWorld(tmp_path, "--principal-claim", "email", "--allow-domain", "example.com")
    try:
        reached, consent_page = sign_in_at_provider(world.authorize_url, world.CALLBACK, "ann")
        assert reached, consent_page
        assert "ann@example.com" in consent_page, consent_page
        code, access = world.redeem(reached)
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
        request = urllib.request.Request(f"{world.base}/mcp", data=initialize, headers={
            "Authorization": f"Bearer {access}", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        # Someone outside --allow-domain gets a page that says so, and no code.
        reached, refusal = sign_in_at_provider(world.authorize_url, world.CALLBACK, "eve@elsewhere.org")
        assert reached is None and "may not use this server" in refusal, refusal
    finally:
        log = world.stop()
    assert "principal=ann@example.com" in log, log[-3000:]
    assert world.secret not in log and access not in log and code not in log


def call_as(base: str, access: str, tool: str) -> dict:
    """A handshake-era session as the bearer of `access`, and one call of `tool`: its result."""
    def post(message: dict, session: str | None = None) -> tuple[dict | None, str | None]:
        headers = {"Authorization": f"Bearer {access}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
        if session:
            headers["Mcp-Session-Id"] = session
        request = urllib.request.Request(f"{base}/mcp", data=json.dumps(message).encode(), headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
            session_id = response.headers.get("Mcp-Session-Id")
        if not text.strip():
            return None, session_id
        if text.lstrip().startswith("{"):
            return json.loads(text), session_id
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        return [e for e in events if "id" in e][-1], session_id

    _, session = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    answer, _ = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}}, session)
    return answer["result"]


def test_the_providers_groups_reach_the_policy(tmp_path):
    """--login-groups-claim: the groups oidc-provider says for the user (from UserInfo) are
    kept with the grant, and a rule on principal.groups lets the on-call user call and
    refuses the other (a tool error: no allow rule holds); groups edited in the consent
    form are refused."""
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rules]]\nname = "on-call-only"\nphase = "call"\neffect = "allow"\n'
        "when = \"method != 'tools/call' || 'on call' in principal.groups\"\n"
    )
    world = LoginWorld(tmp_path, "--login-groups-claim", "groups", "--policy", str(policy))
    results = {}
    try:
        for user in ["oncall-ann", "bob"]:
            reached, page = sign_in_at_provider(world.authorize_url, world.CALLBACK, user)
            assert reached, page
            _, access = world.redeem(reached)
            results[user] = call_as(world.base, access, "whoami")
        # A consent form whose groups were edited in the browser is refused: the CSRF tag
        # covers them.
        promote = lambda fields: [(k, '["staff", "on call"]' if k == "login_groups" else v) for k, v in fields]
        reached, refusal = sign_in_at_provider(world.authorize_url, world.CALLBACK, "mallory", edit=promote)
        assert reached is None and "stale or was not shown to you" in refusal, refusal
    finally:
        log = world.stop()
    assert not results["oncall-ann"].get("isError"), results
    refused = results["bob"]
    assert refused.get("isError") and "on-call-only" not in json.dumps(refused) and "no allow rule" in json.dumps(refused), refused
    assert "groups=2" in log and "groups=1" in log, log[-3000:]
    assert world.secret not in log


def test_only_a_verified_email_names_a_user_or_passes_a_domain_rule(tmp_path):
    """With the email as the principal (or an --allow-domain rule), a
    provider that has not verified the email, does not say, or says the string "false"
    signs nobody in; the boolean true and the string "true" do."""
    attempts = {
        "unverified-eve": False, "silent-eve": False, "stringfalse-eve": False,
        "stringtrue-sam": True, "ann": True,
    }
    for flags in (("--principal-claim", "email"), ("--allow-domain", "example.com")):
        (tmp_path / flags[0].strip("-")).mkdir()
        world = LoginWorld(tmp_path / flags[0].strip("-"), *flags)
        try:
            for user, admitted in attempts.items():
                reached, page = sign_in_at_provider(world.authorize_url, world.CALLBACK, user)
                if admitted:
                    assert reached, f"{flags} {user}: {page}"
                    world.redeem(reached)
                else:
                    assert reached is None, f"{flags} {user} signed in: {page}"
                    assert "not verified" in page, f"{flags} {user}: {page}"
        finally:
            log = world.stop()
        assert log.count('outcome="unverified_email"') >= 3, log[-3000:]
        principal = "principal=ann@example.com" if flags[0] == "--principal-claim" else "principal=ann"
        assert principal in log, log[-3000:]
        assert "principal=unverified-eve" not in log and "principal=silent-eve" not in log, log[-3000:]


def start_from(base: str, client_id: str, address: str) -> tuple[int, str]:
    """GET /authorize for `client_id` from the local address `address`: (status, Location)."""
    import http.client

    host, port = urllib.parse.urlparse(base).hostname, urllib.parse.urlparse(base).port
    query = urllib.parse.urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": LoginWorld.CALLBACK,
                                    "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"})
    connection = http.client.HTTPConnection(host, port, timeout=10, source_address=(address, 0))
    try:
        connection.request("GET", f"/authorize?{query}")
        response = connection.getresponse()
        return response.status, response.getheader("Location") or ""
    finally:
        connection.close()


def test_a_flood_of_sign_ins_does_not_flush_a_user_who_is_signing_in(tmp_path):
    """While a user is at the provider's login page, one address floods
    serve with sign-ins from one client, then another (more than the table that used to
    hold them, here at its old smallest bound); every one is sent to the provider, and the
    user's sign-in still completes: a pending sign-in lives sealed in its state."""
    world = LoginWorld(tmp_path, "--login-max-pending", "1")
    provider = f"http://127.0.0.1:{urllib.parse.urlparse(world.provider_issuer).port}"

    def flood():
        other_client = register(world.base, world.CALLBACK)
        for n in range(40):
            for client in (world.client_id, other_client):
                status, location = start_from(world.base, client, "127.0.0.2")
                assert status == 303 and location.startswith(provider), (n, status, location)

    try:
        reached, page = sign_in_at_provider(world.authorize_url, world.CALLBACK, "ann", meanwhile=flood)
        assert reached, page
        world.redeem(reached)
    finally:
        log = world.stop()
    assert "principal=ann" in log, log[-3000:]
    assert "--login-max-pending is no longer needed" in log, log[-3000:]


def copy_peer(name: str):
    """Node peers run from the peers folder, so `import "oidc-provider"` resolves."""
    import shutil

    from helpers.paths import PEERS

    target = PEERS / name
    shutil.copy(PEER_SCRIPTS / name, target)
    return target


async def test_the_python_sdk_s_oauth_client_signs_in_and_calls(tmp_path):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from helpers.sdk_oauth import sdk_oauth

    port = free_port()
    serve = start_as(port, f"sqlite:{tmp_path / 'oauth.db'}", "--oauth-scope", "mcp:tools")
    url = f"http://127.0.0.1:{port}/mcp"
    http, storage = sdk_oauth(url)
    try:
        async with http, Client(streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None) as client:
            result = await client.call_tool("whoami", {})
            assert not result.is_error, result
        assert storage.tokens.access_token.startswith("mcpat_")
        assert storage.tokens.scope == "mcp:tools"
    finally:
        log = stop(serve)
    assert "python sdk" in log and "outcome=\"issued\"" in log.replace("outcome=issued", "outcome=\"issued\""), log[-3000:]


def test_a_user_signs_in_with_headless_chromium(tmp_path):
    """The same sign-in as above in a real browser: Debian's Chromium runs the provider's
    login page and serve's consent page, whose Content-Security-Policy it enforces
    (`form-action` on the redirect after the POST included: WORKAROUNDS.md 41)."""
    import shutil

    assert shutil.which("chromium"), "scripts/test-all installs Debian's chromium package"
    world = LoginWorld(tmp_path)
    try:
        script = copy_peer_client("chromium_signin.mjs")
        run = subprocess.run([str(NODE_BIN / "node"), str(script), world.authorize_url, world.CALLBACK, "ann"],
                             env=node_env(), capture_output=True, text=True, timeout=90)
        assert run.returncode == 0, run.stderr
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert result["callback"], result
        assert not result["blocked"], result
        _, access = world.redeem(result["callback"])
        assert access.startswith("mcpat_")
    finally:
        log = world.stop()
    assert "principal=ann" in log, log[-3000:]


def copy_peer_client(name: str):
    """Node clients also run from the peers folder (for `playwright-core`)."""
    import shutil

    from helpers.paths import CLIENT_SCRIPTS, PEERS

    target = PEERS / name
    shutil.copy(CLIENT_SCRIPTS / name, target)
    return target
