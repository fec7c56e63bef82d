"""The official conformance suite's server scenarios run against `mcp-stdio serve`, which
fronts a stdio server with the suite's test tools, resources and prompts
(conformance_server.py): every check must pass, for @modelcontextprotocol/conformance
0.1.16 (all its active server scenarios) and for 0.2.0-alpha.12's frozen 2025-11-25
requirement set."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HERE, NODE_BIN, NPM_BIN, PEERS, node_env, start_serve, stop_serve


@pytest.fixture
def served_fixture():
    process, url = start_serve([sys.executable, str(HERE / "conformance_server.py")])
    yield url
    stop_serve(process)


def run_server_suite(suite: list[str], url: str, out_dir: Path, extra: list[str]) -> None:
    run = subprocess.run(
        [str(NODE_BIN / "node"), *suite, "server", "--url", url, "-o", str(out_dir), *extra],
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = run.stdout + run.stderr
    checks = []
    for path in out_dir.rglob("checks.json"):
        checks.extend(json.loads(path.read_text()))
    failures = [c for c in checks if c.get("status") == "FAILURE"]
    scenarios = {p.parent.name for p in out_dir.rglob("checks.json")}
    assert checks, f"the suite produced no checks:\n{report}"
    assert not failures, json.dumps(failures, indent=2) + "\n" + report[-3000:]
    return scenarios


def test_conformance_0_1_16_server_scenarios(served_fixture, tmp_path):
    scenarios = run_server_suite([str(NPM_BIN / "conformance")], served_fixture, tmp_path, [])
    assert len(scenarios) >= 30, sorted(scenarios)


def test_conformance_0_2_0_alpha_12_requirements_2025_11_25(served_fixture, tmp_path):
    suite = [str(PEERS / "node_modules" / "conformance-next" / "dist" / "index.js")]
    run_server_suite(suite, served_fixture, tmp_path, ["--requirements", "2025-11-25"])
