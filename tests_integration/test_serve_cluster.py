"""`serve` as three replicas behind a real nginx (Debian's package, round-robin, no
stickiness), sharing a cluster key: the Python SDK 2.3.0 client in legacy mode (sessions,
the GET stream and its resumption) and in 2026-07-28 mode against server-everything;
input rounds whose retries land on other replicas; our relay with the replica owning its
session killed; the embedded authorization server on PostgreSQL across replicas; forged
ids and replica headers; and a replica drained with SIGTERM."""

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from mcp.client import Client

from helpers.cluster import INIT as INIT_MSG
from helpers.cluster import Cluster, Replica, answer_of, initialize, key_file, post, wait_for
from helpers.host import accept_sampling, accept_with_defaults, through_relay
from helpers.paths import NODE_BIN, NPM_BIN, PEER_SCRIPTS, relay_binary
from helpers.processes import free_port, node_env
from test_serve_oauth import cli_env, postgres_database, run_cli

pytestmark = pytest.mark.anyio

EVERYTHING = [str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), "stdio"]


@pytest.fixture
def everything_cluster(tmp_path):
    cluster = Cluster(tmp_path, EVERYTHING, env=node_env())
    yield cluster
    cluster.stop()


def text_of(result) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_python_sdk_through_nginx_gets_every_call_answered(everything_cluster, mode):
    cluster = everything_cluster
    async with Client(cluster.url, mode=mode, cache=None) as client:
        assert (await client.list_tools()).tools
        for n in range(40):
            result = await client.call_tool("echo", {"message": f"call {n}"})
            assert not result.is_error, result
            assert f"call {n}" in text_of(result)
            result = await client.call_tool("get-sum", {"a": n, "b": 1})
            assert str(n + 1) in text_of(result), text_of(result)
    if mode == "legacy":
        # One session, one child, on one replica; the others forwarded to it.
        forwarded = [r.metric('mcp_stdio_forwarded_total{outcome="answered"}') for r in cluster.replicas]
        served = [r.metric("mcp_stdio_peer_requests_total") for r in cluster.replicas]
        assert sum(1 for f in forwarded if f > 0) == 2, (forwarded, served)
        assert sum(1 for s in served if s > 0) == 1, (forwarded, served)
    else:
        # Stateless: each replica serves what it gets from its own pool, nothing forwarded.
        assert all(r.metric("mcp_stdio_forwarded_total") == 0 for r in cluster.replicas)
        assert all(r.metric("mcp_stdio_sessions_created_total") >= 1 for r in cluster.replicas)


def read_events(response, count: int) -> list[tuple[int, dict]]:
    """The next `count` numbered events of an open GET stream."""
    events, event_id = [], None
    while len(events) < count:
        line = response.readline().decode()
        if not line:
            raise AssertionError("the stream ended")
        line = line.rstrip("\n")
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: ") and event_id is not None:
            events.append((event_id, json.loads(line[6:])))
            event_id = None
    return events


def open_stream(url: str, session: str, last: int | None = None):
    headers = {"accept": "text/event-stream", "mcp-session-id": session}
    if last is not None:
        headers["last-event-id"] = str(last)
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30)


def test_the_get_stream_through_nginx_resumes_after_its_connection_is_cut(everything_cluster):
    cluster = everything_cluster
    session = initialize(cluster.url)
    status, _, body = post(cluster.url, {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}, session)
    assert status == 200, body
    status, _, body = post(cluster.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                          "params": {"name": "toggle-simulated-logging", "arguments": {}}}, session)
    assert "Started simulated" in body, body
    # server-everything logs every 5 s on the session's GET stream.
    first = open_stream(cluster.url, session)
    (n1, e1), (n2, e2) = read_events(first, 2)
    assert e1["method"] == e2["method"] == "notifications/message"
    assert n2 == n1 + 1
    first.close()  # the connection is cut
    # Resuming after the first event replays the second from the owner's buffer, then goes on.
    again = open_stream(cluster.url, session, last=n1)
    (m1, r1), (m2, _) = read_events(again, 2)
    again.close()
    assert (m1, r1) == (n2, e2)
    assert m2 == n2 + 1
    post(cluster.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "toggle-simulated-logging", "arguments": {}}}, session)


async def test_input_rounds_complete_when_the_retries_land_on_other_replicas(everything_cluster):
    cluster = everything_cluster
    calls = [("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}, "sampled through the relay"),
             ("trigger-elicitation-request", {}, "accept")]
    async with Client(cluster.url, mode="2026-07-28", cache=None, sampling_callback=accept_sampling,
                      elicitation_callback=accept_with_defaults) as client:
        for _ in range(3):
            for name, arguments, expected in calls:
                result = await client.call_tool(name, arguments)
                assert not result.is_error, text_of(result)
                assert expected in text_of(result), text_of(result)
    # Round-robin sent the retries elsewhere: each was forwarded to the replica holding the call.
    assert sum(r.metric('mcp_stdio_forwarded_total{outcome="answered"}') for r in cluster.replicas) >= 6


async def test_our_relay_survives_the_loss_of_the_replica_owning_its_session(tmp_path):
    cluster = Cluster(tmp_path, [sys.executable, str(PEER_SCRIPTS / "pid_server.py")])
    try:
        # Handshake era: the relay holds a session, which lives on one replica.
        async with through_relay(cluster.url, "--protocol-era", "legacy") as session:
            await session.initialize()
            first = text_of(await session.call_tool("whoami", {}))
            for _ in range(5):
                assert text_of(await session.call_tool("whoami", {})) == first
            owners = cluster.owner_of_sessions()
            assert sorted(owners) == [0, 0, 1], owners
            owner = owners.index(1)
            # Another client's session on another replica.
            while not any(n for i, n in enumerate(cluster.owner_of_sessions()) if i != owner):
                bystander = initialize(cluster.url)
            cluster.replicas[owner].process.kill()
            cluster.replicas[owner].process.wait()
            # The host sees no error: the relay starts a new session on a living replica.
            second = text_of(await session.call_tool("whoami", {}))
            assert second.isdigit() and second != first
            for _ in range(5):
                assert text_of(await session.call_tool("whoami", {})) == second
        status, _, body = post(cluster.url, {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                              "params": {"name": "whoami", "arguments": {}}}, bystander)
        assert status == 200 and answer_of(body)["result"], body
    finally:
        cluster.stop()


async def test_our_relay_speaking_2026_07_28_survives_the_loss_of_a_replica(tmp_path):
    cluster = Cluster(tmp_path, [sys.executable, str(PEER_SCRIPTS / "pid_server.py")])
    try:
        async with through_relay(cluster.url) as session:
            await session.initialize()
            pids = {text_of(await session.call_tool("whoami", {})) for _ in range(6)}
            assert len(pids) == 3, "stateless: each replica served from its own pool"
            cluster.replicas[0].process.kill()
            cluster.replicas[0].process.wait()
            for _ in range(6):
                assert text_of(await session.call_tool("whoami", {})).isdigit()
    finally:
        cluster.stop()


async def test_the_embedded_authorization_server_on_postgresql_works_across_replicas(tmp_path):
    store = postgres_database()
    public_port = free_port()
    public = f"http://127.0.0.1:{public_port}/mcp"
    flags = ("--enable-oauth", "--dev-user", "alice", "--oauth-store", store, "--public-url", public,
             "--oauth-accepted-for", "1")
    cluster = Cluster(tmp_path, [sys.executable, str(PEER_SCRIPTS / "pid_server.py")], flags=flags,
                      nginx_port=public_port)
    env = cli_env(tmp_path)
    try:
        # Sign-in through nginx: metadata, registration, the consent page and its form, and
        # the token endpoint land on different replicas.
        login = run_cli("login", cluster.url, "--token-store", "file", env=env)
        assert login.returncode == 0, login.stderr
        token = run_cli("token", cluster.url, "--token-store", "file", env=env).stdout.strip()
        assert token.startswith("mcpat_"), "a token from the embedded server"
        bearer = {"authorization": f"Bearer {token}"}
        # A token issued through one replica is accepted by each.
        for replica in cluster.replicas:
            status, _, body = post(replica.url, INIT_MSG, headers=bearer)
            assert status == 200, (replica.port, body)
        async with through_relay(cluster.url, "--oauth", "--token-store", "file", env=env) as session:
            await session.initialize()
            for _ in range(6):
                assert text_of(await session.call_tool("whoami", {})).isdigit()
        # Revoked through one replica, refused by all (within --oauth-accepted-for).
        logout = run_cli("logout", cluster.url, "--token-store", "file", env=env)
        assert logout.returncode == 0, logout.stderr
        for replica in cluster.replicas:
            wait_for(f"replica {replica.port} refuses the revoked token",
                     lambda: post(replica.url, INIT_MSG, headers=bearer)[0] == 401)
    finally:
        cluster.stop()
    for replica in cluster.replicas:
        assert token not in replica.log()


def test_forged_and_foreign_ids_and_forged_replica_headers_are_refused(everything_cluster, tmp_path):
    cluster = everything_cluster
    session = initialize(cluster.url)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "x"}}}
    status, _, body = post(cluster.url, call, session)
    assert status == 200 and "x" in body, body  # the channel works
    # A session id sealed by a replica with another key.
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    stranger = Replica(other_dir, key_file(other_dir, "another-cluster-key-of-more-than-thirty-two-bytes"),
                       EVERYTHING, (), node_env())
    try:
        foreign = initialize(stranger.url)
    finally:
        stranger.stop()
    for forged in ["0123456789abcdef0123456789abcdef", foreign, session[:-4] + "AAAA"]:
        for _ in range(3):  # each replica, round-robin
            status, _, body = post(cluster.url, call, forged)
            assert status == 404, body
    created = sum(r.metric("mcp_stdio_sessions_created_total") for r in cluster.replicas)
    for replica in cluster.replicas:
        for header in ["forged", "AQ" + "A" * 80]:
            status, _, body = post(replica.url, INIT_MSG, headers={"mcp-stdio-peer": header})
            assert status == 403, body
            status, _, body = post(replica.url, call, session, headers={"mcp-stdio-peer": header})
            assert status == 403, body
    assert sum(r.metric("mcp_stdio_sessions_created_total") for r in cluster.replicas) == created
    assert sum(r.metric("mcp_stdio_peer_refused_total") for r in cluster.replicas) == 12


def first_request(wire: bytes) -> bytes:
    """The first HTTP request in `wire`: its head and its body (by Content-Length)."""
    head_end = wire.index(b"\r\n\r\n") + 4
    length = 0
    for line in wire[:head_end].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return wire[:head_end + length]


def send_raw(port: int, request: bytes) -> int:
    """`request` as it is to 127.0.0.1:`port`; the answer's status."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while b"\r\n" not in answer:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split()[1])


def test_an_introduction_captured_on_the_replica_hop_cannot_be_replayed(tmp_path):
    """A genuine `mcp-stdio-peer` request, recorded on the wire between
    two replicas, sent again within its lifetime and after it, to its replica directly, to
    the other one, and through nginx: refused each time, and nothing reaches a child."""
    import time

    cluster = Cluster(tmp_path, [sys.executable, str(PEER_SCRIPTS / "pid_server.py")], n=2, recorded=(1,))
    try:
        owner, other = cluster.replicas[1], cluster.replicas[0]
        session = initialize(owner.url)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
        status, _, body = post(other.url, call, session)
        assert status == 200 and answer_of(body).get("result"), body
        captured_at = time.monotonic()
        request = first_request(bytes(cluster.relays[1].seen))
        assert b"mcp-stdio-peer:" in request.lower(), request[:400]
        served = owner.metric("mcp_stdio_peer_requests_total")

        assert send_raw(owner.port, request) == 403  # seen before
        assert send_raw(other.port, request) == 403  # made for another replica
        for _ in range(2):  # through nginx, round-robin: each replica once
            assert send_raw(cluster.port, request) == 403
        assert owner.metric("mcp_stdio_peer_replayed_total") >= 1
        time.sleep(max(0.0, captured_at + 7 - time.monotonic()))  # past its five seconds
        assert send_raw(owner.port, request) == 403
        assert send_raw(cluster.port, request) == 403
        assert owner.metric("mcp_stdio_peer_requests_total") == served, "no replay was served"
        status, _, body = post(other.url, {**call, "id": 2}, session)
        assert status == 200, body  # genuine forwards still work
    finally:
        cluster.stop()
    assert "older than its few seconds" in owner.log(), owner.log()[-2000:]
    assert "made for another replica" in other.log(), other.log()[-2000:]


def test_sigterm_drains_a_replica_and_nginx_sends_it_nothing_new(tmp_path):
    cluster = Cluster(tmp_path, [sys.executable, str(PEER_SCRIPTS / "pid_server.py")], flags=("--shutdown-grace", "60"))
    try:
        sessions = [initialize(cluster.url) for _ in range(3)]
        owners = cluster.owner_of_sessions()
        assert owners == [1, 1, 1], owners
        draining = cluster.replicas[0]
        status, _ = draining.get("/readyz")
        assert status == 200
        draining.signal(signal.SIGTERM)
        wait_for("/readyz says draining", lambda: draining.get("/readyz") == (503, "draining\n"))
        assert draining.get("/healthz")[0] == 200
        created = draining.metric("mcp_stdio_sessions_created_total")
        fresh = [initialize(cluster.url) for _ in range(6)]
        assert len(set(fresh)) == 6
        assert draining.metric("mcp_stdio_sessions_created_total") == created, "no new session on the draining replica"
        # Every session, the draining replica's included, still works through nginx.
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
        for session in sessions + fresh:
            status, _, body = post(cluster.url, call, session)
            assert status == 200 and answer_of(body)["result"], body
        # Ending its sessions lets it exit, long before the grace.
        for session in sessions:
            request = urllib.request.Request(cluster.url, method="DELETE", headers={"mcp-session-id": session})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200
        assert draining.process.wait(timeout=20) == 0
        assert "drained" in draining.log()
        for session in fresh:
            status, _, body = post(cluster.url, call, session)
            assert status == 200, body
    finally:
        cluster.stop()
