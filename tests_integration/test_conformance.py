"""The official MCP conformance suite's client scenarios, with a Python SDK client that
reaches each scenario's server only through the relay (conformance_client.py)."""

import pytest
from conftest import run_conformance_client

SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_client.py", scenario, tmp_path)
