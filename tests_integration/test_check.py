"""`mcp-stdio check` against every kind of upstream the suite runs: server-everything over
Streamable HTTP and HTTP+SSE, the Python SDK's 2026-07-28 server, `serve` itself in each auth
mode, serve behind a real OpenID Provider (oidc-provider) before and after `mcp-stdio login`,
an unreachable port and a web server that is not MCP. The JSON fields are asserted, not only
the exit code; no token ever appears in the output."""

import http.server
import json
import os
import subprocess
import threading

import pytest

from helpers.openid import serve_behind_openid_provider
from helpers.paths import relay_binary
from helpers.processes import free_port, start_everything, start_serve, stop_serve


def check(url: str, *flags: str, env: dict | None = None) -> tuple[int, dict, str]:
    run = subprocess.run(
        [relay_binary(), "check", url, "--json", *flags],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**{k: v for k, v in os.environ.items() if k != "MCP_BEARER_TOKEN"}, **(env or {})},
    )
    return run.returncode, json.loads(run.stdout), run.stderr


@pytest.mark.parametrize("mode", ["streamableHttp", "sse"])
def test_server_everything_in_each_transport(mode):
    server = start_everything(mode)
    try:
        url = server.url if mode == "streamableHttp" else f"http://127.0.0.1:{server.port}/sse"
        code, report, stderr = check(url)
        assert code == 0, (report, stderr)
        assert report["ok"] is True
        assert report["transport"] == ("streamable-http" if mode == "streamableHttp" else "sse")
        assert report["era"] == "handshake"
        assert report["protocol_version"] == "2025-11-25"
        assert report["server"]["name"] == "mcp-servers/everything"
        assert set(report["capabilities"]) >= {"tools", "resources", "prompts"}
        for kind in ("tools", "resources", "prompts", "resource_templates"):
            count = report["counts"][kind]
            assert count["complete"] is True and count["total"] >= count["first_page"] > 0, (kind, count)
        assert report["auth"]["required"] is False
        assert all(step["ms"] >= 0 for step in report["timings"]["steps"])
    finally:
        server.stop()


def test_the_python_sdk_2026_server(python_sdk_server):
    code, report, stderr = check(python_sdk_server.url)
    assert code == 0, (report, stderr)
    assert report["era"] == "2026-07-28"
    assert report["protocol_version"] == "2026-07-28"
    assert report["transport"] == "streamable-http"
    assert report["server"]["name"] == "py-sdk-fixture"
    assert report["counts"]["tools"]["total"] == 4
    assert [s["step"] for s in report["timings"]["steps"]][0] == "server/discover"


@pytest.mark.parametrize("mode", ["open", "auth-token", "enable-oauth"])
def test_serve_in_each_auth_mode(mode, tmp_path):
    secret = "integration-secret-0a1b2c3d"
    env = {**os.environ, "MCP_STDIO_SERVE_TOKEN": secret} if mode == "auth-token" else None
    flags = ()
    if mode == "enable-oauth":
        flags = ("--enable-oauth", "--dev-user", "alice", "--oauth-store", f"sqlite:{tmp_path / 'as.db'}")
    process, url = start_serve([relay_binary(), "sandbox", "--root", str(tmp_path)], env=env, flags=flags)
    try:
        code, report, _ = check(url)
        if mode == "open":
            assert code == 0, report
            assert report["auth"]["required"] is False
            assert report["era"] == "2026-07-28"
            assert report["counts"]["tools"]["total"] > 0
            return
        assert code == 1, report
        assert report["auth"]["required"] is True
        if mode == "auth-token":
            assert "--bearer-token" in report["hint"]
            code, report, stderr = check(url, env={"MCP_BEARER_TOKEN": secret})
            assert code == 0, report
            assert report["auth"]["credential"] == "bearer-token"
            assert secret not in json.dumps(report) and secret not in stderr
        else:
            assert report["auth"]["dynamic_registration"] is True
            assert report["auth"]["issuer"].startswith("http://127.0.0.1:")
            assert report["hint"] == f"needs a login: run `mcp-stdio login {url}` (or check again with --oauth)"
    finally:
        stop_serve(process)


def test_serve_behind_a_real_openid_provider_before_and_after_login(tmp_path):
    with serve_behind_openid_provider(tmp_path) as world:
        resource, issuer, env = world.resource, world.issuer, world.env
        code, report, _ = check(resource, env=env)
        assert code == 1, report
        auth = report["auth"]
        assert auth["required"] is True and auth["credential"] == "none"
        assert auth["authorization_servers"] == [issuer]
        assert auth["issuer"] == issuer
        assert "authorization_code" in auth["grant_types_supported"]
        assert auth["dynamic_registration"] is True
        assert "mcp:tools" in auth["scopes_supported"]
        assert auth["login"] is None
        assert report["hint"] == f"needs a login: run `mcp-stdio login {resource}` (or check again with --oauth)"

        login = subprocess.run([relay_binary(), "login", resource, "--oauth-timeout", "30"], env={**os.environ, **env},
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert login.returncode == 0, login.stderr
        code, report, stderr = check(resource, "--log-level", "debug", env=env)
        assert code == 0, (report, stderr)
        assert report["auth"]["credential"] == "stored-login"
        assert report["auth"]["login"]["issuer"] == issuer
        assert report["counts"]["tools"]["total"] >= 1
        token = subprocess.run([relay_binary(), "token", resource], env={**os.environ, **env},
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL).stdout.strip()
        assert len(token) > 20
        assert token not in json.dumps(report) and token not in stderr


def test_check_oauth_logs_in_at_a_real_openid_provider_first(tmp_path):
    """`check --oauth` with no stored login registers at oidc-provider, logs in (the browser
    stand-in approves), and reports with the new login; the Python tool's `--check --oauth`
    does the same and prints the text report. No token reaches either output."""
    with serve_behind_openid_provider(tmp_path) as world:
        code, report, stderr = check(world.resource, "--oauth", "--oauth-timeout", "30", "--log-level", "debug", env=world.env)
        assert code == 0, (report, stderr)
        assert report["auth"]["credential"] == "new-login"
        assert report["auth"]["login"]["issuer"] == world.issuer
        assert "login" in [step["step"] for step in report["timings"]["steps"]]
        assert report["counts"]["tools"]["total"] >= 1
        events = world.log.read_text().splitlines()
        assert "registered" in events and "grant authorization_code" in events, events
        token = subprocess.run([relay_binary(), "token", world.resource], env={**os.environ, **world.env},
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL).stdout.strip()
        assert len(token) > 20
        assert token not in json.dumps(report) and token not in stderr

        fresh = {**world.env, "XDG_STATE_HOME": str(tmp_path / "fresh"), "HOME": str(tmp_path / "fresh")}
        run = subprocess.run([relay_binary(), "--check", "--oauth", "--oauth-timeout", "30", world.resource],
                             env={**os.environ, **fresh}, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, (run.stdout, run.stderr)
        assert run.stdout.startswith(f"mcp-stdio check {world.resource}"), run.stdout
        assert "used: new-login" in run.stdout, run.stdout
        assert "to log in to" in run.stderr, run.stderr
        assert token not in run.stdout and token not in run.stderr


class _Page(http.server.BaseHTTPRequestHandler):
    def _page(self):
        body = b"<html><body>not an MCP server</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _page

    def log_message(self, *args):
        pass


def test_an_unreachable_port_and_a_web_server():
    code, report, _ = check(f"http://127.0.0.1:{free_port()}/mcp")
    assert code == 1
    assert report["ok"] is False and report["transport"] is None
    assert "cannot reach" in report["error"] and "is the server running" in report["hint"]

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        code, report, _ = check(f"http://127.0.0.1:{web.server_address[1]}/")
        assert code == 1, report
        assert report["era"] is None and report["server"] is None
        assert "text/html" in report["error"]
        assert "MCP endpoint" in report["hint"]
    finally:
        web.shutdown()
