"""A management command starts without the provider's SDK (openai) and the MCP SDK (mcp, and
its types: mcp_types), together over two seconds to import, and a server process imports them
before it serves, so that no first chat pays for them on the event loop (rojos/eager.py).

Each case is a real process: in this one, other tests have imported the SDKs long before.
"""

import os
import subprocess
import sys
from pathlib import Path

from rojos.eager import MODULES

ROOT = Path(__file__).resolve().parents[2]
SDKS = {"openai", "mcp", "mcp_types", "aiohttp"}


def _python(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Python in the project's directory, on the test settings and a database of its own."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _imported(importtime: str) -> set[str]:
    """The top-level packages `-X importtime` names (one line per module imported)."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in importtime.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_a_management_command_imports_neither_sdk(tmp_path: Path):
    """`manage.py check` sets Django up and loads the URLconf and the admin, as most commands
    do: neither SDK is imported."""
    run = _python("-X", "importtime", "manage.py", "check", tmp_path=tmp_path)

    assert run.returncode == 0, run.stderr[-2000:]
    imported = _imported(run.stderr)
    assert "django" in imported  # what the process imported was read
    assert imported & SDKS == set()


def test_the_server_imports_both_sdks_before_it_serves(tmp_path: Path):
    """The ASGI application's module imports both, and each module the commands leave out."""
    code = "import sys, roject.asgi; print(' '.join(sorted(sys.modules)))"
    run = _python("-c", code, tmp_path=tmp_path)

    assert run.returncode == 0, run.stderr[-2000:]
    imported = set(run.stdout.split())
    assert imported >= SDKS
    assert "mcp.client.auth" in imported
    assert imported >= set(MODULES)
