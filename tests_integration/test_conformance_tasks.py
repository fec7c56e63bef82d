"""The official conformance suite's `tasks-*` server scenarios (0.2.0-alpha.12, the
2026-07-28 tasks extension, SEP-2663) run against `mcp-stdio serve`:

- in front of a handshake-era stdio server speaking 2025-11-25 tasks (the TypeScript SDK
  v1's experimental tasks API, legacy_tasks_server.mjs): the gateway translates, holding
  each task under its own id, its questions as `inputRequests`, its `tasks/result` open;
- in front of a stdio server that speaks the extension itself (the Python SDK's
  extension API, extension_tasks_server.py): the gateway passes tasks through after its
  header and opt-in checks.

Every check of every scenario must pass, except what the suite itself leaves unfinished:
`tasks-status-notifications` is a stub that always skips, with the reason quoted below."""

import json
import sys

import pytest

from helpers.conformance import NEXT_SUITE, checks_of, run_suite
from helpers.paths import NODE_BIN, PEER_SCRIPTS
from helpers.processes import node_env, start_serve, stop_serve

SCENARIOS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]

# The suite's own words for the scenario it has not finished.
UNFINISHED = {
    "tasks-status-notifications": "SEP-2663 delivers notifications/tasks via the SEP-2575 subscriptions/listen stream, not via the tools/call POST SSE response that the prior harness observed. The harness needs a rewrite against the new channel; tracked as a follow-up.",
}

CHILDREN = {
    "legacy-child": lambda: [str(NODE_BIN / "node"), str(PEER_SCRIPTS / "legacy_tasks_server.mjs")],
    "extension-child": lambda: [sys.executable, str(PEER_SCRIPTS / "extension_tasks_server.py")],
}


@pytest.fixture(scope="module", params=sorted(CHILDREN))
def served(request):
    process, url = start_serve(CHILDREN[request.param](), env=node_env())
    yield url
    stop_serve(process)


def checks(url: str, scenario: str, out_dir) -> list[dict]:
    report, files, _ = run_suite([*NEXT_SUITE, "server", "--url", url, "--scenario", scenario], out_dir, env=node_env(), timeout=120)
    found = checks_of(files)
    assert found, report
    return found


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tasks_scenario_passes(served, scenario, tmp_path):
    found = checks(served, scenario, tmp_path)
    failures = [c for c in found if c.get("status") not in ("SUCCESS", "INFO")]
    assert not failures, json.dumps(failures, indent=2)
    # The schema of everything the gateway said was checked too.
    assert any(c["id"] == "wire-schema-valid" for c in found), [c["id"] for c in found]


@pytest.mark.parametrize("scenario", sorted(UNFINISHED))
def test_the_unfinished_scenario_skips_for_the_suites_own_reason(served, scenario, tmp_path):
    found = checks(served, scenario, tmp_path)
    assert [c["status"] for c in found] == ["SKIPPED"], found
    assert UNFINISHED[scenario] in found[0]["errorMessage"], found[0]
