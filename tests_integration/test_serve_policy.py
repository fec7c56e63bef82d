"""`serve --policy` and `--audit-log` as a Python agent sees them: the Python SDK client
(mcp 2.3.0), both eras, against a Python SDK stdio server whose tools carry annotations,
with tokens from a real identity provider (oidc-provider, client credentials: `sub` is the
client). alice sees every tool; bob does not see `delete_note` (calling it anyway is an
unknown tool) and is refused `write_note` by a call rule that reads the annotations, with a
tool error the SDK shows as such. Every call is one audit line naming its caller and the
refusing rule, and no token is in the file."""

import json
import sys

import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from helpers.paths import PEER_SCRIPTS
from helpers.processes import start_serve, stop_serve
from test_serve_identity import AUDIENCE, Identity, token_for, until

pytestmark = pytest.mark.anyio

POLICY = """
[[rules]]
name = "delete-is-alices"
phase = "list"
effect = "deny"
when = "tool.name == 'delete_note' && principal.sub != 'alice'"

[[rules]]
name = "lists"
phase = "list"
effect = "allow"
when = "'mcp:tools' in principal.scopes"

[[rules]]
name = "bob-reads"
phase = "call"
effect = "deny"
when = "principal.sub == 'bob' && !tool.annotations.readOnlyHint"
message = "bob may only read notes"

[[rules]]
name = "calls"
phase = "call"
effect = "allow"
when = "principal.authenticated"
"""


@pytest.fixture
def served(tmp_path):
    world = Identity()
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    audit = tmp_path / "audit.log"
    serve, url = start_serve(
        [sys.executable, str(PEER_SCRIPTS / "notes_server.py")],
        flags=("--oauth-issuer", world.issuer, "--oauth-audience", AUDIENCE, "--oauth-scope", "mcp:tools",
               "--oauth-require-at-jwt", "--policy", str(policy), "--audit-log", str(audit)),
    )
    try:
        yield world.issuer, url, audit
    finally:
        stop_serve(serve)
        world.provider.terminate()
        world.provider.wait(timeout=10)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_caller_sees_and_may_call_what_the_policy_says(served, mode):
    issuer, url, audit = served
    alice, bob = token_for(issuer, "alice"), token_for(issuer, "bob")

    async def connect(token):
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)

    http, client = await connect(alice)
    async with http, client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"read_note", "write_note", "delete_note"}, names
        assert not (await client.call_tool("write_note", {"name": "a", "text": "b"})).is_error

    http, client = await connect(bob)
    async with http, client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"read_note", "write_note"}, names
        read = await client.call_tool("read_note", {"name": "todo"})
        assert not read.is_error and read.content[0].text == "buy milk", read
        refused = await client.call_tool("write_note", {"name": "todo", "text": "x"})
        assert refused.is_error, refused
        assert refused.content[0].text == 'Refused by the gateway\'s policy rule "bob-reads": bob may only read notes'
        with pytest.raises(MCPError) as hidden:
            await client.call_tool("delete_note", {"name": "todo"})
        assert "Unknown tool: delete_note" in str(hidden.value)

    def calls_logged():
        lines = [json.loads(line) for line in audit.read_text().splitlines()]
        calls = [line for line in lines if line["method"] == "tools/call"]
        return calls if len(calls) >= 4 else None

    # The writer gathers lines for a few milliseconds before it writes them.
    calls = until(calls_logged, "the four calls' audit lines")
    assert [(c["principal"], c["name"], c["outcome"]) for c in calls] == [
        ("alice", "write_note", "ok"),
        ("bob", "read_note", "ok"),
        ("bob", "write_note", "refused"),
        ("bob", "delete_note", "refused"),
    ], calls
    assert calls[2]["rule"] == "bob-reads" and calls[3]["rule"] == "delete-is-alices"
    assert all(c["client"] and c["arguments_digest"].startswith("sha256:") for c in calls), calls
    text = audit.read_text()
    assert alice not in text and bob not in text, "a token in the audit log"
