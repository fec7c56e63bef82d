"""The official conformance suite's `auth/*` client scenarios: a Python SDK client whose only
way to the scenario's protected server is `mcp-stdio URL --oauth` (clients/conformance_auth_client.py),
with a `$BROWSER` stand-in that follows the authorization redirect.

All 21 of the suite's scored scenarios pass (the list is in helpers/conformance.py; the
extension scenarios are in test_conformance_enterprise.py).
"""

import pytest
from helpers.conformance import AUTH_2025, run_conformance_client



@pytest.mark.parametrize("scenario", AUTH_2025)
def test_auth_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_auth_client.py", scenario, tmp_path, strict=True)
