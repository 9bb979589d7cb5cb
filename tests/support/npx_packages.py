"""Programs from the npm registry run through `npx` (cached in ~/.npm), for the tests against
peers that are not ours: skipped without `npx`, unless ROJO_REQUIRE_NPX is set (CI)."""

import os
import shutil
import subprocess

import pytest

# The newest versions that run on Node 20 (newer ones ask for Node 22 in `engines`).
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"


def npx_path() -> str:
    """The path of `npx`; the test is skipped without it, or fails where CI requires it."""
    found = shutil.which("npx")
    if found is None:
        if os.environ.get("ROJO_REQUIRE_NPX"):
            pytest.fail("ROJO_REQUIRE_NPX is set but npx (Node.js) is missing")
        pytest.skip("this test runs a peer from the npm registry with npx (Node.js)")
    return found


def npx_installed(package: str, *probe: str, says: str) -> list[str]:
    """The command that runs `package`, fetched into npx's cache first by running it with
    `probe` (whose output must hold `says`), so a server's start is not a download."""
    command = [npx_path(), "--yes", package]
    run = subprocess.run(
        [*command, *probe], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert says in run.stdout + run.stderr, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    return command
