"""The official conformance suite's `auth/*` client scenarios: a Python SDK client whose only
way to the scenario's protected server is `mcp-stdio URL --oauth` (conformance_auth_client.py),
with a `$BROWSER` stand-in that follows the authorization redirect.

21 of the suite's 22 pass. Not run: auth/cross-app-access-complete-flow (an extension for
enterprise identity providers: RFC 8693 token exchange for an ID-JAG, then a JWT bearer grant),
which the relay does not implement.
"""

import pytest
from conftest import run_conformance_client

SCENARIOS = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_auth_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_auth_client.py", scenario, tmp_path, strict=True)
