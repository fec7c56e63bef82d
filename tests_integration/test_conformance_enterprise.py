"""The official conformance suite's enterprise authorization extensions, each through
`mcp-stdio URL` with the scenario's inputs given as flags (clients/conformance_auth_client.py
turns the scenario's context into them): DPoP-bound tokens (RFC 9449, SEP-1932) with and
without server nonces, enterprise-managed authorization (an ID-JAG, SEP-990), workload
identity (SEP-1933) and the client credentials grant, from the 0.2.0-alpha.12 line; and the
cross-app access flow from 0.1.16. Every check must pass, warnings included."""

import pytest
from helpers.conformance import run_conformance_client

NEXT = [
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/enterprise-managed-authorization",
    "auth/wif-jwt-bearer",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
]


@pytest.mark.parametrize("scenario", NEXT)
def test_enterprise_scenario_passes(scenario, tmp_path):
    run_conformance_client("conformance_auth_client.py", scenario, tmp_path, strict=True, next_suite=True)


def test_cross_app_access_passes(tmp_path):
    run_conformance_client("conformance_auth_client.py", "auth/cross-app-access-complete-flow", tmp_path, strict=True)
