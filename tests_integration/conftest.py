"""Fixtures for the integration suite: real servers started as subprocesses for a test and
stopped after it. What they are built from is in `helpers/`; the peer servers are in
`peers/`, the scripts the conformance suite runs as clients in `clients/`."""

import sys

import pytest

from helpers.paths import PEER_SCRIPTS
from helpers.processes import Server, free_port, start_everything


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(params=["sse", "json"])
def python_sdk_server(request):
    port = free_port()
    args = [sys.executable, str(PEER_SCRIPTS / "py_server.py"), str(port)] + (["--json"] if request.param == "json" else [])
    server = Server(args, port)
    server.mode = request.param
    yield server
    server.stop()


@pytest.fixture
def everything_server():
    server = start_everything("streamableHttp")
    yield server
    server.stop()
