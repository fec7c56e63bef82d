"""`mcp-stdio serve --config .mcp.json --aggregate`: server-everything and
@modelcontextprotocol/server-memory (both stdio) and fastmcp 4.1.6's own Streamable HTTP
server (remote, `"type": "http"` with a header, reached through the relay), from the
`.mcp.json` Claude Code writes, behind one endpoint, driven by the Python SDK client (mcp 2.3.0) in legacy and 2026-07-28
modes and by the MCP Inspector CLI: every tool of each server listed once under its
server's name and callable, a resource of each read back by its listed URI, a prompt fetched,
server-everything's sampling and elicitation tools answered by the client, and one server
killed mid-run while calls to the other go on."""

import json
import os
import signal
import subprocess
import sys

import anyio
import pytest
from helpers.host import accept_sampling, accept_with_defaults
from helpers.paths import NODE_BIN, NPM_BIN, PEER_SCRIPTS
from helpers.processes import Server, free_port, node_env
from helpers.served import Served, claude_code_mcp_json
from mcp.client import Client

pytestmark = pytest.mark.anyio

PATH = {"PATH": f"{NODE_BIN}:/usr/bin:/bin"}
EVERYTHING = (str(NODE_BIN / "node"), [str(NPM_BIN / "mcp-server-everything"), "stdio"], PATH)
MEMORY = (str(NODE_BIN / "node"), [str(NPM_BIN / "mcp-server-memory")], PATH)


@pytest.fixture(scope="module")
def fastmcp_http():
    port = free_port()
    server = Server([sys.executable, str(PEER_SCRIPTS / "fastmcp_server.py"), str(port)], port)
    yield server
    server.stop()


@pytest.fixture
def served(tmp_path, fastmcp_http, monkeypatch):
    memory = (MEMORY[0], MEMORY[1], {**MEMORY[2], "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")})
    config = json.loads(claude_code_mcp_json({"everything": EVERYTHING, "memory": memory}))
    # As `claude mcp add --transport http fast URL --header ...` writes it.
    config["mcpServers"]["fast"] = {"type": "http", "url": fastmcp_http.url, "headers": {"X-Team": "${TEAM_NAME}"}}
    monkeypatch.setenv("TEAM_NAME", "research")
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    served = Served(path, "--aggregate")
    yield served
    assert served.stop() == 0


def texts(result) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def own_tools(served, name, mode):
    async with Client(f"{served.base}/{name}/mcp", mode=mode, cache=None, sampling_callback=accept_sampling, elicitation_callback=accept_with_defaults) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_every_servers_tools_resources_prompts_and_questions_through_one_endpoint(served, mode):
    everything = await own_tools(served, "everything", mode)
    memory = await own_tools(served, "memory", mode)
    fast = await own_tools(served, "fast", mode)
    async with Client(f"{served.base}/mcp", mode=mode, cache=None, sampling_callback=accept_sampling, elicitation_callback=accept_with_defaults) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert len(listed) == len(set(listed)), listed
        assert set(listed) == {f"everything__{t}" for t in everything} | {f"memory__{t}" for t in memory} | {f"fast__{t}" for t in fast}
        assert fast == {"add"}, fast

        assert "Echo: one endpoint" in texts(await client.call_tool("everything__echo", {"message": "one endpoint"}))
        created = await client.call_tool("memory__create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]})
        assert not created.is_error, texts(created)
        assert "Ada" in texts(await client.call_tool("memory__read_graph", {}))
        assert "42" in texts(await client.call_tool("fast__add", {"a": 2, "b": 40}))

        resources = (await client.list_resources()).resources
        assert all(str(r.uri).split("+", 1)[0] in ("everything", "memory", "fast") for r in resources), resources
        for server in ("everything", "memory", "fast"):
            # A resource of each, read back by the URI it was listed under.
            listed = next(r for r in resources if str(r.uri).startswith(f"{server}+"))
            read = await client.read_resource(listed.uri)
            assert str(read.contents[0].uri) == str(listed.uri), read

        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert "everything__simple-prompt" in prompts, prompts
        prompt = await client.get_prompt("everything__simple-prompt")
        assert "simple prompt" in prompt.messages[0].content.text
        review = await client.get_prompt("fast__review", {"subject": "the gateway"})
        assert "the gateway" in review.messages[0].content.text

        sampled = await client.call_tool("everything__trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
        assert not sampled.is_error and "sampled through the relay" in texts(sampled), texts(sampled)
        elicited = await client.call_tool("everything__trigger-elicitation-request", {})
        assert not elicited.is_error and "accept" in texts(elicited), texts(elicited)


def inspector(url, *method):
    done = subprocess.run([str(NPM_BIN / "mcp-inspector"), "--cli", url, "--transport", "http", *method],
                          capture_output=True, text=True, timeout=120, env=node_env(), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_inspector_cli_lists_and_calls_every_server(served):
    url = f"{served.base}/mcp"
    listed = inspector(url, "--method", "tools/list")
    assert '"everything__echo"' in listed and '"memory__read_graph"' in listed, listed
    assert "Echo: from the inspector" in inspector(url, "--method", "tools/call", "--tool-name", "everything__echo", "--tool-arg", "message=from the inspector")
    assert '"entities"' in inspector(url, "--method", "tools/call", "--tool-name", "memory__read_graph")
    assert "everything+demo://" in inspector(url, "--method", "resources/list")
    assert '"text": "5"' in inspector(url, "--method", "tools/call", "--tool-name", "fast__add", "--tool-arg", "a=2", "--tool-arg", "b=3")


def children_running(needle: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if needle.encode() in cmdline.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


async def test_one_server_killed_mid_run_while_calls_to_the_other_go_on(served):
    async with Client(f"{served.base}/mcp", mode="legacy", cache=None) as client:
        assert "Echo: before" in texts(await client.call_tool("everything__echo", {"message": "before"}))
        outcome = {}

        async def long_call():
            try:
                outcome["result"] = await client.call_tool("everything__trigger-long-running-operation", {"duration": 10, "steps": 5})
            except Exception as error:  # what the agent's code sees
                outcome["error"] = str(error)

        async with anyio.create_task_group() as group:
            group.start_soon(long_call)
            await anyio.sleep(1)  # the call is with server-everything (it reports every 2 s)
            for pid in children_running("mcp-server-everything"):
                os.kill(pid, signal.SIGKILL)
            # The other server goes on while the first is down.
            assert not (await client.call_tool("memory__read_graph", {})).is_error
        said = outcome.get("error") or texts(outcome["result"])
        assert "everything" in said, said
        # Until it is back, its calls say it is down; then it is used again (it is tried
        # again every 2 s).
        with anyio.fail_after(30):
            while True:
                try:
                    result = await client.call_tool("everything__echo", {"message": "after"})
                    break
                except Exception as error:
                    assert "everything" in str(error) and "unavailable" in str(error), str(error)
                    await anyio.sleep(0.5)
        assert "Echo: after" in texts(result)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_python_sdk_s_oauth_client_signs_in_at_the_aggregate_endpoint(tmp_path, mode):
    """`--enable-oauth` with `--config`: the Python SDK's own OAuth client finds serve's
    authorization server from the aggregate endpoint's 401, registers, consents, and gets a
    token for that endpoint (its RFC 8707 resource), which another endpoint refuses."""
    import urllib.error
    import urllib.request

    from helpers.sdk_oauth import sdk_oauth
    from mcp.client.streamable_http import streamable_http_client

    path = tmp_path / ".mcp.json"
    path.write_text(claude_code_mcp_json({"everything": EVERYTHING, "memory": (MEMORY[0], MEMORY[1], {**MEMORY[2], "MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")})}))
    served = Served(path, "--aggregate", "--enable-oauth", "--dev-user", "alice", "--oauth-store", f"sqlite:{tmp_path / 'oauth.db'}")
    url = f"{served.base}/mcp"
    http, storage = sdk_oauth(url)
    try:
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert "everything__echo" in listed and "memory__read_graph" in listed, listed
            assert "Echo: signed in" in texts(await client.call_tool("everything__echo", {"message": "signed in"}))
        access = storage.tokens.access_token
        assert access.startswith("mcpat_")
        # The token is for the aggregate endpoint only.
        probe = urllib.request.Request(f"{served.base}/memory/mcp", data=b"{}", headers={
            "Authorization": f"Bearer {access}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(probe, timeout=10)
        assert refused.value.code == 401
    finally:
        assert served.stop() == 0
    log = "".join(served.log)
    assert "principal=alice" in log, log[-3000:]
    assert access not in log
