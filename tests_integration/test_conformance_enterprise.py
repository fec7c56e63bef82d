"""The official conformance suite's enterprise authorization extensions, each through
`mcp-stdio URL` with the scenario's inputs given as flags (clients/conformance_auth_client.py
turns the scenario's context into them): DPoP-bound tokens (RFC 9449, SEP-1932) with and
without server nonces and the client credentials grant, from the 0.2.0-alpha.12 line.
Every check must pass, warnings included."""

import pytest
from helpers.conformance import run_conformance_client

NEXT = [
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
]


@pytest.mark.parametrize("scenario", NEXT)
def test_enterprise_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_auth_client.py", scenario, tmp_path, strict=True, next_suite=True)
