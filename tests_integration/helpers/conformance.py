"""The official conformance suite, run against a client script of ours, and the `auth/*`
scenario lists in one place: the ones both suite lines share, and what each adds."""

import json
import subprocess
import sys
from pathlib import Path

from helpers.paths import CLIENT_SCRIPTS, INTEGRATION, NODE_BIN, NPM_BIN, PEERS
from helpers.processes import node_env

# The authorization scenarios of both lines of the suite (0.1.16 and 0.2.0-alpha).
AUTH_SHARED = [
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
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
]
# 0.1.16 only: the 2025-03-26 fallbacks and the client-credentials extension. The
# enterprise extensions (DPoP, ID-JAG, workload identity, and 0.1.16's
# auth/cross-app-access-complete-flow) run in test_conformance_enterprise.py.
AUTH_2025 = AUTH_SHARED + [
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
]
# 0.2.0-alpha only: the authorization-server migration and RFC 9207 `iss` checks.
AUTH_2026 = AUTH_SHARED + [
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
]


# The two lines of the suite: 0.1.16 (handshake-era) and 0.2.0-alpha (the 2026-07-28
# requirements), installed by install.sh.
SUITE = [str(NPM_BIN / "conformance")]
NEXT_SUITE = [str(PEERS / "node_modules" / "conformance-next" / "dist" / "index.js")]


def run_suite(args: list[str], out_dir: Path, env: dict, timeout: int) -> tuple[str, list[Path], int]:
    """Runs the suite under Node 22 with `args`; returns its report, the `checks.json` files
    it wrote (failing when it wrote none) and its exit code."""
    run = subprocess.run([str(NODE_BIN / "node"), *args, "-o", str(out_dir)], env=env, capture_output=True, text=True, timeout=timeout)
    report = run.stdout + run.stderr
    files = list(out_dir.rglob("checks.json"))
    assert files, f"the suite produced no checks:\n{report}"
    return report, files, run.returncode


def checks_of(files: list[Path]) -> list[dict]:
    checks = []
    for path in files:
        checks.extend(json.loads(path.read_text()))
    return checks


def run_conformance_client(
    client_script: str, scenario: str, out_dir: Path, strict: bool = False, next_suite: bool = False, env: dict | None = None
) -> None:
    """Runs one client scenario of the official conformance suite with `client_script` as
    the client under test, and fails on any FAILURE (and, when `strict`, any WARNING).
    `next_suite` runs the 0.2.0-alpha line (the 2026-07-28 requirements) instead of 0.1.16."""
    # A client script runs as a module of this suite, so it imports helpers like a test does.
    module = Path(client_script).stem
    assert (CLIENT_SCRIPTS / f"{module}.py").is_file(), client_script
    command = f"{sys.executable} -m clients.{module}"
    suite = NEXT_SUITE if next_suite else SUITE
    report, files, returncode = run_suite(
        [*suite, "client", "--command", command, "--scenario", scenario],
        out_dir,
        env={**node_env(), "PYTHONPATH": str(INTEGRATION), **(env or {})},
        timeout=120,
    )
    checks = checks_of(files)
    bad = ("FAILURE", "WARNING") if strict else ("FAILURE",)
    failures = [c for c in checks if c.get("status") in bad]
    assert checks, f"the suite produced no checks:\n{report}"
    assert not failures, f"{scenario} failed:\n" + json.dumps(failures, indent=2) + "\n" + report
    assert returncode == 0 or (strict and "OVERALL: PASSED" in report), report
