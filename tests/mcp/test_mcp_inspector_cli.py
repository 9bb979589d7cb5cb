"""Rojo's MCP endpoint against a client that is not ours: the MCP Inspector's CLI mode (npm,
INSPECTOR in tests/support/npx_packages.py, the newest that runs on Node 20). That version
sends no headers of its own, so it goes through the proxy that adds an API token, as the
conformance suite's server checks do (tests/support/bearer_proxy.py); and it reaches only an
address that ends in /mcp."""

import json
import subprocess

import pytest

from roject.identity.tokens import api_token_create
from roject.storage import project_root
from tests.support.bearer_proxy import bearer_proxy
from tests.support.mcp_clients import mcp_url
from tests.support.npx_packages import INSPECTOR, npx_installed

pytestmark = pytest.mark.django_db(transaction=True)


def inspector(command: list[str], url: str, *method: str, tmp_path) -> dict:
    """One request of the Inspector's CLI; its answer, as it prints it."""
    run = subprocess.run(
        [*command, "--cli", url, "--transport", "http", "--method", *method],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    return json.loads(run.stdout)


def test_the_inspectors_cli_lists_and_calls_the_projects_tools(
    server_process, users, project, tmp_path
):
    """Its tools/list gets the project's tools with their hints, and its tools/call writes a
    file as the token's user."""
    command = npx_installed(INSPECTOR, "--cli", "--help", says="--cli")
    server = server_process()
    secret = api_token_create(user=users["editor"], name="inspector").secret
    with bearer_proxy(server.base_url, secret) as proxy:
        # Its CLI posts to <origin>/mcp unless the address ends in /mcp: the endpoint
        # answers at its address with /mcp added too.
        url = mcp_url(proxy, project.slug) + "/mcp"
        listed = inspector(command, url, "tools/list", tmp_path=tmp_path)
        written = inspector(
            command, url, "tools/call", "--tool-name", "write_text_content",
            "--tool-arg", "path=notes/inspected.txt", "--tool-arg", "text=from the Inspector",
            tmp_path=tmp_path,
        )  # fmt: skip

    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert tools["list_files"]["annotations"]["readOnlyHint"] is True
    assert tools["write_text_content"]["inputSchema"]["properties"]["path"]
    assert not written.get("isError"), written
    assert (project_root(project.pk) / "notes" / "inspected.txt").read_text() == (
        "from the Inspector"
    )
