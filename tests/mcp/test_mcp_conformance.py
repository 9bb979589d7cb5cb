"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance` 0.1.13, the
newest that runs on Node 20) against Rojo's MCP server endpoint and Rojo's MCP client.

The server's checks run through a proxy that adds a personal API token, which the suite's
own client cannot send; the client's run `manage.py mcp_conformance_client`, Rojo's client
code with the SDK's OAuth, against each scenario's test server. The lists name the scenarios
that pass today and must keep passing; the others are named with why they fail. The suite
comes from the npm registry through `npx` (cached in ~/.npm); without `npx` these tests
are skipped, saying so, unless ROJO_REQUIRE_NPX is set (CI).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from roject.identity.tokens import api_token_create
from tests.support.bearer_proxy import bearer_proxy
from tests.support.mcp_clients import mcp_url

PACKAGE = "@modelcontextprotocol/conformance@0.1.13"
STAMP = re.compile(r"-\d{4}-\d\d-\d\dT[\d-]+Z$")  # the time the suite adds to a result's folder

# Every server scenario that needs none of the suite's fixtures; and two that call the
# suite's tools, which pass on the endpoint's answer for a tool it does not have (an
# `isError` result with a text).
SERVER_PASSING = {
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "tools-call-simple-text",
    "tools-call-error",
}
# The others ask for the suite's fixtures (its `test_*` tools, `test://` resources, prompts
# and completions), or for what the endpoint does not offer (logging, subscriptions,
# prompts), or for a server that asks the client something (sampling, elicitation).
SERVER_FAILING = {
    "logging-set-level": "no logging capability",
    "completion-complete": "no completions",
    "tools-call-image": "the suite's tool",
    "tools-call-audio": "the suite's tool",
    "tools-call-embedded-resource": "the suite's tool",
    "tools-call-mixed-content": "the suite's tool",
    "tools-call-with-logging": "the suite's tool, and no logging",
    "tools-call-with-progress": "the suite's tool",
    "tools-call-sampling": "the suite's tool, which asks the client",
    "tools-call-elicitation": "the suite's tool, which asks the client",
    "elicitation-sep1034-defaults": "the suite's tool, which asks the client",
    "elicitation-sep1330-enums": "the suite's tool, which asks the client",
    "resources-read-text": "the suite's resource",
    "resources-read-binary": "the suite's resource",
    "resources-templates-read": "the suite's resource template",
    "resources-subscribe": "no subscriptions",
    "resources-unsubscribe": "no subscriptions",
    "prompts-list": "no prompts",
    "prompts-get-simple": "no prompts",
    "prompts-get-with-args": "no prompts",
    "prompts-get-embedded-resource": "no prompts",
    "prompts-get-with-image": "no prompts",
}

CLIENT_PASSING = [
    "initialize",
    "tools_call",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/resource-mismatch",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "elicitation-sep1034-client-defaults",
]
# Why each of the others fails today.
CLIENT_FAILING = {
    # The suite's 0.1.13 authorization server for a tenant path publishes the root as its
    # `issuer`; the SDK checks it against the server it asked (RFC 8414 section 3.3) and
    # stops. Fixed in the suite's 0.1.15 (its #152), which needs a newer Node.
    "auth/metadata-var2": "the suite's metadata names the wrong issuer",
    "auth/metadata-var3": "the suite's metadata names the wrong issuer",
}


@pytest.fixture(autouse=True)
def npx():
    """The suite runs with npx; skipped without it, unless ROJO_REQUIRE_NPX is set (CI)."""
    if shutil.which("npx") is None:
        if os.environ.get("ROJO_REQUIRE_NPX"):
            pytest.fail("ROJO_REQUIRE_NPX is set but npx (Node.js) is missing")
        pytest.skip("the MCP conformance suite runs with npx (Node.js)")


def conformance(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600):
    """Run the suite with `args`; its exit status and output (the answers are in `-o`)."""
    return subprocess.run(
        [shutil.which("npx"), "--yes", PACKAGE, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def scenarios_passed(results: Path) -> tuple[set[str], dict[str, list[str]]]:
    """From `-o` results: the scenarios with no failed check, and the others' failures."""
    passed, failed = set(), {}
    for checks_file in results.rglob("checks.json"):
        where = checks_file.parent.relative_to(results).as_posix()  # auth/… is a folder
        name = STAMP.sub("", where.removeprefix("server-"))
        checks = json.loads(checks_file.read_text())
        failures = [
            f"{c['name']}: {c.get('errorMessage') or c['description']}"
            for c in checks
            if c["status"] == "FAILURE"
        ]
        if failures:
            failed[name] = failures
        else:
            passed.add(name)
    return passed, failed


@pytest.mark.django_db(transaction=True)
def test_rojos_mcp_server_passes_the_scenarios_that_need_no_fixtures(
    server_process, users, project, tmp_path
):
    """Against a project's endpoint, as an owner's token, the suite runs every scenario
    named here, and every scenario that does not ask for its own fixtures passes."""
    server = server_process()
    secret = api_token_create(user=users["owner"], name="conformance").secret
    with bearer_proxy(server.base_url, secret) as proxy:
        run = conformance(
            "server", "--url", mcp_url(proxy, project.slug), "-o", str(tmp_path / "results"),
            cwd=tmp_path,
        )  # fmt: skip
    passed, failed = scenarios_passed(tmp_path / "results")
    assert passed | set(failed) == SERVER_PASSING | set(SERVER_FAILING), run.stdout[-3000:]
    lost = {name: failed[name] for name in SERVER_PASSING - passed}
    assert not lost, lost


def client_env(tmp_path: Path) -> dict:
    """The command's environment: the app's settings, as in production, on the test's dirs."""
    return {
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "ROJO_STORAGE_DIR": str(tmp_path / "storage"),
    }


def client_command() -> str:
    # The suite splits the command on spaces: neither path may hold one.
    return f"{sys.executable} {Path(settings.BASE_DIR) / 'manage.py'} mcp_conformance_client"


@pytest.mark.parametrize("scenario", CLIENT_PASSING)
def test_rojos_mcp_client_passes(scenario, tmp_path):
    """Rojo's MCP client (the connection the rojos use, OAuth included) passes the
    scenario: every check of the suite's test server succeeds, and the command ends well."""
    results = tmp_path / "results"
    # The suite gives a client 30 s by default; this one starts Django first, which a CI
    # machine running four workers on two cores has taken past that (CLIENT TIMED OUT with
    # every check passed).
    run = conformance(
        "client", "--command", client_command(), "--scenario", scenario, "-o", str(results),
        "--timeout", "90000", cwd=tmp_path, env=client_env(tmp_path), timeout=180,
    )  # fmt: skip
    passed, failed = scenarios_passed(results)
    ended_well = run.returncode == 0 or only_a_slightly_late_reconnect(results)
    assert ended_well and scenario in passed, (failed, run.stderr[-4000:])


def only_a_slightly_late_reconnect(results: Path) -> bool:
    """Whether the one thing short of success was sse-retry's WARNING that the client came
    back after the retry's 500 ms plus the suite's 200 ms tolerance but within its 1 s
    (which the suite calls "acceptable but may indicate network delays"; its 0.1.13 still
    exits 1 for it): a busy machine's lateness, not a client ignoring `retry` (a FAILURE)."""
    short = [
        check
        for checks_file in results.rglob("checks.json")
        for check in json.loads(checks_file.read_text())
        if check["status"] not in ("SUCCESS", "INFO")
    ]
    return bool(short) and all(
        check["id"] == "client-sse-retry-timing"
        and check["status"] == "WARNING"
        and check.get("details", {}).get("slightlyLate")
        and not check["details"].get("veryLate")
        and not check["details"].get("tooEarly")
        for check in short
    )
