"""A Python SDK (mcp 2.3.0) server instrumented with the OpenTelemetry Python SDK: the SDK's
own middleware makes a SERVER span per request, continuing the trace in `params._meta`
(SEP-414), and the spans go over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT.

Usage: python otel_server.py SERVICE_NAME stdio | python otel_server.py SERVICE_NAME http PORT
"""

import sys

from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": sys.argv[1]}))
# Each span leaves as it ends: the test waits for it, and a stdio server may be killed.
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)

server = MCPServer("otel-fixture")


@server.tool()
def lookup(key: str) -> str:
    """Answers with the key, upper-cased."""
    return key.upper()


if __name__ == "__main__":
    if sys.argv[2] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
