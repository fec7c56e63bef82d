"""What the clients people run show them. Two clients nobody here wrote: the MCP Inspector's
CLI 2.12.0 (the TypeScript SDK v2 client, the lineage of Claude Code, Claude Desktop, Cursor
and VS Code, which validates `structuredContent` against `outputSchema` even on errors) and
fastmcp 4.1.6's `Client` (what Python agents use). Each is pointed at `serve` with the
built-in sandbox (a success, a denylist refusal, a path outside the workspace, a schema
refusal), `serve -- server-everything`, `serve --config` with server-filesystem and
server-memory (a write in one session read back in another), and spawns the relay itself in
front of fastmcp's own HTTP server (a tool call, a resource read, a prompt) and of
server-everything's legacy HTTP+SSE transport. The assertions are on what the client
prints or returns to its user: the denial's words, the result."""

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest
from fastmcp import Client as FastClient
from fastmcp.client.transports import StdioTransport

from helpers.paths import NODE_BIN, NPM_BIN, PEER_SCRIPTS, relay_binary
from helpers.processes import Server, free_port, node_env, start_everything, start_serve, stop_serve
from helpers.served import Served, claude_code_mcp_json

pytestmark = pytest.mark.anyio

INSPECTOR = NPM_BIN / "mcp-inspector"


@dataclass
class Shown:
    """What a client showed its user: the text it printed or raised, and whether it failed."""

    text: str
    failed: bool


def inspector(target: list[str], *method: str) -> Shown:
    """One Inspector CLI run (one session), as a person would type it."""
    done = subprocess.run(
        [str(INSPECTOR), "--cli", *target, *method],
        capture_output=True, text=True, timeout=120, env=node_env(), stdin=subprocess.DEVNULL,
    )
    return Shown(done.stdout + done.stderr, done.returncode != 0)


def inspector_tool(target: list[str], name: str, **arguments) -> Shown:
    pairs = [f"{key}={value}" for key, value in arguments.items()]
    return inspector(target, "--method", "tools/call", "--tool-name", name, *(["--tool-arg", *pairs] if pairs else []))


async def fastmcp_tool(target, name: str, **arguments) -> Shown:
    """One fastmcp session calling one tool the way an agent does (errors raise)."""
    try:
        async with FastClient(target) as client:
            result = await client.call_tool(name, arguments)
    except Exception as error:  # what the agent's code sees: the exception's words
        return Shown(f"{type(error).__name__}: {error}", True)
    texts = [block.text for block in result.content if getattr(block, "text", None)]
    return Shown("\n".join(texts) + "\n" + json.dumps(result.structured_content), False)


async def shown_by(client: str, target, name: str, **arguments) -> Shown:
    if client == "inspector":
        return inspector_tool(target if isinstance(target, list) else [target], name, **arguments)
    return await fastmcp_tool(target, name, **arguments)


def relay_target(client: str, url: str):
    """The relay as each client spawns a stdio server."""
    if client == "inspector":
        # The Inspector takes `--log-level` for itself, so the relay gets its default.
        return [relay_binary(), url]
    return StdioTransport(relay_binary(), [url, "--log-level", "warn"])


CLIENTS = ["inspector", "fastmcp"]


@pytest.fixture(scope="module")
def sandbox_served(tmp_path_factory):
    root = tmp_path_factory.mktemp("workspace") / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    (root / ".env").write_text("TOKEN=do-not-leak-this-value\n")
    process = subprocess.Popen(
        [relay_binary(), "serve", "--port", "0", "--log-level", "info"],
        cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = None
    for line in process.stderr:
        if " at http://" in line:
            url = line.split(" at ", 1)[1].split()[0]
            break
    assert url, "serve printed its URL"
    yield url
    stop_serve(process)


@pytest.mark.parametrize("client", CLIENTS)
async def test_the_sandbox_through_serve_shows_results_and_refusals_in_words(client, sandbox_served):
    read = await shown_by(client, sandbox_served, "read_file", path="src/lib.rs")
    assert not read.failed and "pub fn answer() -> u32 { 42 }" in read.text, read.text

    denied = await shown_by(client, sandbox_served, "read_file", path=".env")
    assert denied.failed, denied.text
    assert "'.env' is on the denylist" in denied.text and "ask the user to share what you need" in denied.text, denied.text
    assert "do-not-leak-this-value" not in denied.text
    # The failure the TypeScript client used to print instead of the refusal.
    assert "must have required property" not in denied.text, denied.text

    outside = await shown_by(client, sandbox_served, "read_file", path="../../etc/passwd")
    assert outside.failed and "is outside the workspace" in outside.text, outside.text
    assert "paths must stay inside the workspace root 'project/'" in outside.text, outside.text
    assert "root:" not in outside.text and "must have required property" not in outside.text, outside.text

    schema = await shown_by(client, sandbox_served, "read_file", path="src/lib.rs", mode="w")
    assert schema.failed and "mode is not a known argument" in schema.text, schema.text


@pytest.mark.parametrize("client", CLIENTS)
async def test_server_everything_through_serve(client):
    process, url = start_serve([str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), "stdio"], env=node_env())
    try:
        echoed = await shown_by(client, url, "echo", message="hello through serve")
        assert not echoed.failed and "Echo: hello through serve" in echoed.text, echoed.text
        summed = await shown_by(client, url, "get-sum", a=2, b=40)
        assert not summed.failed and "42" in summed.text, summed.text
    finally:
        stop_serve(process)


@pytest.fixture
def team_config(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    config = tmp_path / ".mcp.json"
    node = str(NODE_BIN / "node")
    env = {"PATH": f"{NODE_BIN}:/usr/bin:/bin"}
    config.write_text(claude_code_mcp_json({
        "filesystem": (node, [str(NPM_BIN / "mcp-server-filesystem"), str(shared)], env),
        "memory": (node, [str(NPM_BIN / "mcp-server-memory")], {**env, "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}),
    }))
    served = Served(config)
    yield served, shared
    served.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_config_file_of_node_servers_keeps_what_one_session_wrote_for_the_next(client, team_config):
    served, shared = team_config
    files, memory = f"{served.base}/filesystem/mcp", f"{served.base}/memory/mcp"
    note = f"written by {client} in one session"
    wrote = await shown_by(client, files, "write_file", path=str(shared / "note.txt"), content=note)
    assert not wrote.failed, wrote.text
    read = await shown_by(client, files, "read_text_file", path=str(shared / "note.txt"))
    assert not read.failed and note in read.text, read.text
    outside = await shown_by(client, files, "read_text_file", path="/etc/passwd")
    assert outside.failed or "Access denied" in outside.text, outside.text
    assert "root:x:0" not in outside.text

    entity = f"project-{client}"
    if client == "inspector":
        created = inspector(
            [memory], "--method", "tools/call", "--tool-name", "create_entities", "--tool-arg",
            "entities=" + json.dumps([{"name": entity, "entityType": "project", "observations": ["ships Friday"]}]),
        )
    else:
        created = await fastmcp_tool(memory, "create_entities", entities=[{"name": entity, "entityType": "project", "observations": ["ships Friday"]}])
    assert not created.failed, created.text
    found = await shown_by(client, memory, "read_graph")
    assert not found.failed and entity in found.text and "ships Friday" in found.text, found.text


@pytest.fixture(scope="module")
def fastmcp_http():
    port = free_port()
    server = Server([sys.executable, str(PEER_SCRIPTS / "fastmcp_server.py"), str(port)], port)
    yield server
    server.stop()


async def test_the_inspector_spawns_the_relay_in_front_of_fastmcps_http_server(fastmcp_http):
    target = relay_target("inspector", fastmcp_http.url)
    added = inspector_tool(target, "add", a=2, b=40)
    assert not added.failed and '"result": 42' in added.text, added.text
    note = inspector(target, "--method", "resources/read", "--uri", "note://greeting")
    assert not note.failed and "hello from fastmcp" in note.text, note.text
    prompt = inspector(target, "--method", "prompts/get", "--prompt-name", "review", "--prompt-args", "subject=the-diff")
    assert not prompt.failed and "Please review the-diff carefully." in prompt.text, prompt.text


async def test_fastmcp_spawns_the_relay_in_front_of_fastmcps_http_server(fastmcp_http):
    async with FastClient(relay_target("fastmcp", fastmcp_http.url)) as client:
        added = await client.call_tool("add", {"a": 2, "b": 40})
        assert added.data == 42
        note = await client.read_resource("note://greeting")
        assert note[0].text == "hello from fastmcp"
        prompt = await client.get_prompt("review", {"subject": "the-diff"})
        assert prompt.messages[0].content.text == "Please review the-diff carefully."


@pytest.fixture(scope="module")
def everything_sse():
    server = start_everything("sse")
    server.url = f"http://127.0.0.1:{server.port}/sse"
    yield server
    server.stop()


async def test_the_inspector_spawns_the_relay_in_front_of_a_legacy_sse_server(everything_sse):
    target = relay_target("inspector", everything_sse.url)
    echoed = inspector_tool(target, "echo", message="over HTTP+SSE")
    assert not echoed.failed and "Echo: over HTTP+SSE" in echoed.text, echoed.text
    resource = inspector(target, "--method", "resources/read", "--uri", "demo://resource/static/document/architecture.md")
    assert not resource.failed and "architecture" in resource.text.lower(), resource.text
    prompt = inspector(target, "--method", "prompts/get", "--prompt-name", "simple-prompt")
    assert not prompt.failed and '"messages"' in prompt.text, prompt.text


async def test_fastmcp_spawns_the_relay_in_front_of_a_legacy_sse_server(everything_sse):
    async with FastClient(relay_target("fastmcp", everything_sse.url)) as client:
        echoed = await client.call_tool("echo", {"message": "over HTTP+SSE"})
        assert echoed.content[0].text == "Echo: over HTTP+SSE"
        document = await client.read_resource("demo://resource/static/document/architecture.md")
        assert "architecture" in document[0].text.lower()
        prompt = await client.get_prompt("simple-prompt")
        assert prompt.messages
