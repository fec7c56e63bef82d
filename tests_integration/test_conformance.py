"""The official MCP conformance suite's client scenarios (0.1.16: handshake-era servers), with
a Python SDK client that reaches each scenario's server only through the relay: a legacy host
(clients/conformance_client.py), and a 2026-07-28 host (clients/conformance_2026_client.py), for which the
relay runs the handshake and turns the server's mid-call elicitation into input_required."""

import pytest
from helpers.conformance import run_conformance_client

SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_client.py", scenario, tmp_path)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario_passes_with_a_modern_host(scenario, tmp_path):
    run_conformance_client(
        "conformance_2026_client.py", scenario, tmp_path, strict=True, env={"MCP_STDIO_HOST_MODE": "2026-07-28"}
    )
