"""OpenTelemetry traces through every hop, as an operator's collector sees them: a Python
agent instrumented with the OpenTelemetry Python SDK calls a tool with the Python SDK
client (mcp 2.3.0, whose client span puts the trace into `params._meta`), through
`mcp-stdio serve` to a Python SDK stdio server that continues the trace from `_meta`; and
through the relay in front of a remote Python SDK server that does the same. Every process
exports OTLP/HTTP to a receiver in this test that decodes with the official
`opentelemetry-proto` package. One trace, with the parent–child chain, span names and
attributes of the MCP semantic conventions."""

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from helpers.paths import CLIENT_SCRIPTS, PEER_SCRIPTS, relay_binary
from helpers.processes import free_port, start_serve, stop_serve, wait_listening

SERVER, CLIENT = 2, 3  # opentelemetry.proto.trace.v1.Span.SpanKind


class Receiver:
    """OTLP/HTTP protobuf on 127.0.0.1: every span it is sent, with its service's name."""

    def __init__(self):
        self.spans = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.add(request)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, request):
        with self.lock:
            for resource in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource.resource.attributes if a.key == "service.name"), ""
                )
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            {
                                "service": service,
                                "name": span.name,
                                "kind": span.kind,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "attributes": {a.key: a.value.string_value for a in span.attributes},
                            }
                        )

    def find(self, service, name, deadline_s=20.0):
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            with self.lock:
                for span in self.spans:
                    if span["service"] == service and span["name"] == name:
                        return span
            time.sleep(0.05)
        with self.lock:
            seen = [(s["service"], s["name"]) for s in self.spans]
        raise AssertionError(f"no {name!r} span from {service} within {deadline_s} s; got {seen}")

    def stop(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


def otel_env(receiver) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and "proxy" not in k.lower()}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    env["OTEL_METRIC_EXPORT_INTERVAL"] = "200"
    return env


def run_agent(env, *args) -> dict:
    done = subprocess.run(
        [sys.executable, str(CLIENT_SCRIPTS / "otel_agent.py"), *args],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_chain(receiver, trace_id, gateway_service, gateway_kind, server_service):
    """agent task → the agent's client span → the gateway's span → the server's span."""
    root = receiver.find("agent", "agent task")
    sent = receiver.find("agent", "MCP send tools/call lookup")
    gateway = receiver.find(gateway_service, "tools/call lookup")
    served = receiver.find(server_service, "tools/call lookup")
    for span in (root, sent, gateway, served):
        assert span["trace_id"] == trace_id, span
    assert sent["parent"] == root["span_id"]
    assert gateway["parent"] == sent["span_id"], "the gateway continues the agent's _meta"
    assert served["parent"] == gateway["span_id"], "the server continues the gateway's span"
    assert gateway["kind"] == gateway_kind and served["kind"] == SERVER
    attributes = gateway["attributes"]
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "lookup"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"]
    assert "error.type" not in attributes
    assert "milk" not in json.dumps(attributes), "no argument values"
    return gateway


def test_one_trace_from_a_python_agent_through_serve_to_a_python_stdio_server(receiver):
    env = otel_env(receiver)
    server = [sys.executable, str(PEER_SCRIPTS / "otel_server.py"), "notes-server", "stdio"]
    serve, url = start_serve(server, env=env, flags=("--otel-service-name", "gateway"))
    try:
        answer = run_agent(env, "http", url)
        assert answer["text"] == "MILK"
        gateway = assert_chain(receiver, answer["trace_id"], "gateway", SERVER, "notes-server")
        assert gateway["attributes"]["mcp.protocol.version"], "the era the agent speaks"
    finally:
        assert stop_serve(serve) == 0


def test_one_trace_from_a_python_host_through_the_relay_to_a_remote_python_server(receiver):
    env = otel_env(receiver)
    port = free_port()
    remote = subprocess.Popen(
        [sys.executable, str(PEER_SCRIPTS / "otel_server.py"), "remote-server", "http", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, remote)
        env["OTEL_SERVICE_NAME"] = "relay"
        answer = run_agent(env, "stdio", relay_binary(), f"http://127.0.0.1:{port}/mcp")
        assert answer["text"] == "MILK"
        assert_chain(receiver, answer["trace_id"], "relay", CLIENT, "remote-server")
    finally:
        remote.terminate()
        remote.wait(timeout=10)
