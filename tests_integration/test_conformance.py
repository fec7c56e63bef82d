"""The official MCP conformance suite's client scenarios, with a Python SDK client that
reaches each scenario's server only through the relay (conformance_client.py)."""

import json
import subprocess
import sys

import pytest
from conftest import HERE, NODE_BIN, NPM_BIN, node_env

SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario_passes(scenario, tmp_path):
    env = node_env()
    command = f"{sys.executable} {HERE / 'conformance_client.py'}"
    run = subprocess.run(
        [str(NODE_BIN / "node"), str(NPM_BIN / "conformance"), "client", "--command", command, "--scenario", scenario, "-o", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = run.stdout + run.stderr
    checks = []
    for path in tmp_path.rglob("checks.json"):
        checks.extend(json.loads(path.read_text()))
    failures = [c for c in checks if c.get("status") == "FAILURE"]
    assert checks, f"the suite produced no checks:\n{report}"
    assert not failures, f"{scenario} failed:\n" + json.dumps(failures, indent=2) + "\n" + report
    assert run.returncode == 0, report
