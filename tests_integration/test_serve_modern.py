"""2026-07-28 clients through `mcp-stdio serve`: the Python SDK client (mcp 2.3.0) in
`mode="2026-07-28"` and `mode="auto"`, against a handshake-era child (server-everything), the
Python SDK's own dual-era stdio server, and the built-in sandbox; and 16 and 64 calls in
flight with zero errors."""

import sys

import anyio
import pytest
from helpers.paths import INTEGRATION, NODE_BIN, NPM_BIN, PEER_SCRIPTS
from helpers.processes import node_env, start_serve, stop_serve
from helpers.host import accept_sampling, accept_with_defaults, relay_binary
from mcp.client import Client

pytestmark = pytest.mark.anyio

CHILDREN = {
    "server-everything": lambda: ([str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), "stdio"], node_env()),
    "python-sdk": lambda: ([sys.executable, str(PEER_SCRIPTS / "conformance_server.py")], None),
    "sandbox": lambda: ([relay_binary(), "sandbox", "--root", str(INTEGRATION)], None),
}
TOOL = {"server-everything": ("echo", {"message": "hi"}, "hi"), "python-sdk": ("test_simple_text", {}, "simple text"), "sandbox": ("file_info", {"path": "conftest.py"}, "conftest.py")}


@pytest.mark.parametrize("child", sorted(CHILDREN))
@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_modern_clients_through_serve(child, mode):
    command, env = CHILDREN[child]()
    process, url = start_serve(command, env=env)
    try:
        async with Client(url, mode=mode, cache=None) as client:
            assert client.session.protocol_version == "2026-07-28"
            tools = (await client.list_tools()).tools
            assert tools
            name, arguments, expected = TOOL[child]
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result
            assert expected in " ".join(getattr(b, "text", "") for b in result.content)
    finally:
        stop_serve(process)


@pytest.mark.parametrize("in_flight", [16, 64])
async def test_many_modern_calls_in_flight_without_errors(in_flight):
    command, env = CHILDREN["python-sdk"]()
    process, url = start_serve(command, env=env)
    errors = []
    try:
        async with Client(url, mode="2026-07-28", cache=None) as client:
            limit = anyio.Semaphore(in_flight)

            async def one(n):
                async with limit:
                    await call()

            async def call():
                try:
                    result = await client.call_tool("test_simple_text", {})
                    if result.is_error:
                        errors.append(result)
                except Exception as error:  # counted, not raised: the figure is the point
                    errors.append(error)

            async with anyio.create_task_group() as group:
                for n in range(in_flight * 4):
                    group.start_soon(one, n)
    finally:
        stop_serve(process)
    assert errors == [], errors[:3]


@pytest.mark.parametrize("child", ["server-everything", "python-sdk-legacy-only"])
async def test_a_handshake_era_childs_questions_reach_a_2026_07_28_client_as_input_rounds(child):
    # The child asks mid-call (sampling, elicitation); the gateway parks the call and the
    # SDK client answers the input_required round through its callbacks, then retries.
    if child == "server-everything":
        command, env = CHILDREN["server-everything"]()
        calls = [("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}, "sampled through the relay"),
                 ("trigger-elicitation-request", {}, "accept")]
    else:
        command, env = [sys.executable, str(PEER_SCRIPTS / "conformance_server.py"), "--legacy-only"], None
        calls = [("test_input_required_result_sampling", {}, "sampled through the relay"),
                 ("test_input_required_result_multi_round", {}, "Both steps complete")]
    process, url = start_serve(command, env=env)
    try:
        async with Client(url, mode="2026-07-28", cache=None, sampling_callback=accept_sampling, elicitation_callback=accept_with_defaults) as client:
            for name, arguments, expected in calls:
                result = await client.call_tool(name, arguments)
                text = " ".join(getattr(b, "text", "") for b in result.content)
                assert not result.is_error, text
                assert expected in text, text
    finally:
        stop_serve(process)


async def test_server_everythings_own_roots_sync_does_not_fail_the_call_it_lands_in():
    # server-everything asks for roots 350 ms after its handshake, whatever call runs then.
    # A 2026-07-28 client that declared no roots must still get that call's answer (this
    # was a -32021 that lost the call, seen in CI through nginx).
    command, env = CHILDREN["server-everything"]()
    process, url = start_serve(command, env=env)
    try:
        async with Client(url, mode="2026-07-28", cache=None) as client:
            # Spans the 350 ms mark: the first call reaches a child started for it.
            result = await client.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 2})
            text = " ".join(getattr(b, "text", "") for b in result.content)
            assert not result.is_error, text
            assert "completed" in text, text
    finally:
        stop_serve(process)
