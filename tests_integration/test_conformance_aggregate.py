"""The official conformance suite's server scenarios against an aggregate endpoint
(`serve --config FILE --aggregate`) whose servers are the suite's fixture
(conformance_server.py) and the built-in sandbox. The fixture's tools and prompts are
published under their own names through `[servers.conf.aliases]` (the suite calls them by
name), so what is measured is the aggregate's routing, lists, questions and translation.

What cannot pass through a namespacing gateway, by check id: the resource scenarios read,
subscribe to and expect back the fixture's own URIs (`test://static-text`, …), and an
aggregate publishes every URI under its server's prefix (`conf+test://static-text`), the
only way two servers' resources can never collide; a URI cannot be aliased."""

import json
import re
import sys

import pytest

from helpers.conformance import NEXT_SUITE, SUITE, checks_of, run_suite
from helpers.paths import INTEGRATION, PEER_SCRIPTS, relay_binary
from helpers.processes import node_env
from helpers.served import Served

# Scenarios scored elsewhere and not here: the tasks extension (not implemented).
UNSCORED_PREFIXES = ("tasks-",)
# The resource URIs are the fixture's own in these checks (see above).
NAMESPACED_URIS = re.compile(r"^(resources-|server-resources-)")


def fixture_names() -> list[str]:
    """The fixture's tool and prompt names, read from its source."""
    source = (PEER_SCRIPTS / "conformance_server.py").read_text()
    return re.findall(r"@server\.(?:tool|prompt)\([^)]*\)\n(?:async )?def (\w+)", source)


@pytest.fixture
def aggregate(tmp_path):
    aliases = "\n".join(f'{name} = "{name}"' for name in fixture_names())
    config = tmp_path / "serve.toml"
    config.write_text(
        "aggregate = true\n\n"
        f"[servers.conf]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEER_SCRIPTS / 'conformance_server.py'))}, \"--legacy-only\"]\n\n"
        f"[servers.conf.aliases]\n{aliases}\n\n"
        f"[servers.files]\ncommand = {json.dumps(relay_binary())}\nargs = [\"sandbox\", \"--root\", {json.dumps(str(INTEGRATION))}]\n"
    )
    served = Served(config, "--aggregate")
    yield f"{served.base}/mcp"
    assert served.stop() == 0


def run_against(suite: list[str], url: str, out_dir, extra: list[str], allowed: set[str] = frozenset()):
    report, files, _ = run_suite([*suite, "server", "--url", url, *extra], out_dir, env=node_env(), timeout=600)
    scored = [p for p in files if not p.parent.name.removeprefix("server-").startswith(UNSCORED_PREFIXES)]
    checks = checks_of(scored)
    failures = [c for c in checks if c.get("status") == "FAILURE" and not NAMESPACED_URIS.match(c.get("id", "")) and c.get("id") not in allowed]
    assert checks, f"the suite produced no scored checks:\n{report}"
    assert not failures, json.dumps(failures, indent=2) + "\n" + report[-3000:]
    passed = [c for c in checks if c.get("status") == "SUCCESS"]
    excused = sorted({c.get("id") for c in checks if c.get("status") == "FAILURE"})
    print(f"passed {len(passed)}; failures excused: {excused}")
    return passed


def test_conformance_0_1_16_through_an_aggregate(aggregate, tmp_path):
    passed = run_against(SUITE, aggregate, tmp_path, [])
    assert len(passed) >= 30, len(passed)


def test_conformance_0_2_0_alpha_12_2025_11_25_through_an_aggregate(aggregate, tmp_path):
    run_against(NEXT_SUITE, aggregate, tmp_path, ["--requirements", "2025-11-25"])


# A handshake-era server's questions cannot meet two 2026-07-28 checks through any
# translation (see test_conformance_server.py's LEGACY_CHILD_LIMITS): the suite's own key
# in inputRequests, and three questions in one round.
LEGACY_CHILD_LIMITS = {"sep-2322-elicitation-incomplete", "sep-2322-multiple-inputs-incomplete"}


# The suite calls two diagnostic tools the fixture does not have (test_streaming_elicitation,
# test_logging_tool). Served alone, the fixture (FastMCP) answers an unknown tool with an
# `isError` result, which the suite takes as the tool having run; the aggregate answers it
# with -32602, the protocol error the spec names for an unknown tool, which the suite
# reports as "not testable". Neither is tested either way.
UNKNOWN_DIAGNOSTIC_TOOLS = {"sep-2575-http-server-no-independent-requests-on-stream", "sep-2575-server-no-log-without-loglevel"}


def test_conformance_0_2_0_alpha_12_2026_07_28_through_an_aggregate(aggregate, tmp_path):
    run_against(NEXT_SUITE, aggregate, tmp_path, ["--requirements", "2026-07-28"], allowed=LEGACY_CHILD_LIMITS | UNKNOWN_DIAGNOSTIC_TOOLS)
