"""A Python agent instrumented with the OpenTelemetry Python SDK: inside a root span
`agent task` it calls `lookup` with the Python SDK client (mcp 2.3.0), whose own client
span puts the trace context into `params._meta`; every span goes over OTLP/HTTP to
OTEL_EXPORTER_OTLP_ENDPOINT. Prints the tool's text and the root span's trace id.

Usage: python otel_agent.py http URL | python otel_agent.py stdio COMMAND...
"""

import json
import os
import sys

import anyio
from mcp import StdioServerParameters
from mcp.client import Client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("otel-agent")


async def main() -> None:
    if sys.argv[1] == "http":
        server = sys.argv[2]
    else:
        # The SDK passes a spawned server only a few variables unless told: the relay
        # needs the OTEL_* ones, as a host's configured `env` would give it.
        server = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ))
    with tracer.start_as_current_span("agent task") as root:
        async with Client(server) as client:
            result = await client.call_tool("lookup", {"key": "milk"})
        trace_id = format(root.get_span_context().trace_id, "032x")
    print(json.dumps({"text": result.content[0].text, "trace_id": trace_id}))
    provider.shutdown()


anyio.run(main)
