"""The official conformance suite's `auth/*` client scenarios: a Python SDK client whose only
way to the scenario's protected server is `mcp-stdio URL --oauth` (clients/conformance_auth_client.py),
with a `$BROWSER` stand-in that follows the authorization redirect.

21 of the suite's 22 pass (the list, and the one not run, are in helpers/conformance.py).
"""

import pytest
from helpers.conformance import AUTH_2025, run_conformance_client



@pytest.mark.parametrize("scenario", AUTH_2025)
def test_auth_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_auth_client.py", scenario, tmp_path, strict=True)
