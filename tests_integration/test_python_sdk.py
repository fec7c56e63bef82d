"""The Python SDK (mcp 2.3.0) on both sides: its client (legacy handshake) as the stdio host,
its Streamable HTTP server (SSE and JSON response modes) as the upstream."""

import anyio
import pytest
from helpers.host import through_relay

pytestmark = pytest.mark.anyio


async def test_handshake_tools_and_unicode(python_sdk_server):
    async with through_relay(python_sdk_server.url) as session:
        init = await session.initialize()
        assert init.server_info.name == "py-sdk-fixture"
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"add", "slow", "shout"} <= names
        result = await session.call_tool("add", {"a": 2, "b": 40})
        assert result.content[0].text == "42"
        text = "grüße \u2028 line"
        shouted = await session.call_tool("shout", {"text": text})
        assert shouted.content[0].text == text.upper()
        await session.send_ping()


async def test_progress_arrives_and_a_slow_call_does_not_block_a_ping(python_sdk_server):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with through_relay(python_sdk_server.url) as session:
        await session.initialize()
        order = []

        async def slow_call():
            result = await session.call_tool("slow", {"seconds": 1.5}, progress_callback=on_progress)
            order.append(("slow", result.content[0].text))

        async def pings():
            await anyio.sleep(0.2)
            await session.send_ping()
            order.append(("ping", None))

        async with anyio.create_task_group() as group:
            group.start_soon(slow_call)
            group.start_soon(pings)
        assert order[0] == ("ping", None), order
        assert order[1] == ("slow", "done")
        # SSE mode streams progress as it happens; a JSON response has nowhere to carry it.
        assert progress == ([1, 2, 3] if python_sdk_server.mode == "sse" else [])


async def test_many_concurrent_calls(python_sdk_server):
    async with through_relay(python_sdk_server.url) as session:
        await session.initialize()
        results = {}

        async def add(n):
            results[n] = (await session.call_tool("add", {"a": n, "b": n})).content[0].text

        async with anyio.create_task_group() as group:
            for n in range(24):
                group.start_soon(add, n)
        assert results == {n: str(2 * n) for n in range(24)}
