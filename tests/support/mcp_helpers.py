"""MCP servers for the tests: the reference time server, and tests/support/mcp_servers/edge.py over
stdio or as a streamable HTTP subprocess on a free port."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from rojos.models import McpServer

EDGE = str(Path(__file__).resolve().parent / "mcp_servers" / "edge.py")
PROGRESS = str(Path(__file__).resolve().parent / "mcp_servers" / "progress.py")


def time_server(**fields) -> McpServer:
    """The reference time server (PyPI's mcp-server-time), over stdio; trusted unless told
    (most tests are about something else than whether its annotations count)."""
    defaults = {
        "trusted": True,
        "name": "Time",
        "slug": "time",
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "mcp_server_time"],
    }
    return McpServer.objects.create(**{**defaults, **fields})


def progress_server(**fields) -> McpServer:
    """tests/support/mcp_servers/progress.py over stdio, trusted: tools that report progress."""
    defaults = {
        "trusted": True,
        "name": "Progress",
        "slug": "progress",
        "transport": "stdio",
        "command": sys.executable,
        "args": [PROGRESS],
    }
    return McpServer.objects.create(**{**defaults, **fields})


def edge_server(**fields) -> McpServer:
    """The edge server over stdio; it writes its pid to <project root>/edge.pid. Trusted
    unless told, like time_server."""
    defaults = {
        "trusted": True,
        "name": "Edge",
        "slug": "edge",
        "transport": "stdio",
        "command": sys.executable,
        "args": [EDGE, "{project_root}/edge.pid"],
    }
    return McpServer.objects.create(**{**defaults, **fields})


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie counts as gone: it has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpEdge:
    """The edge server as a streamable HTTP subprocess."""

    def __init__(self, log_path: Path) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, EDGE, "--http", str(port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "EDGE_TOKEN": "from-env"},
        )
        deadline = time.monotonic() + 90  # a start, on a loaded machine
        while time.monotonic() < deadline:
            try:
                httpx2.get(self.url, timeout=1)
                return
            except httpx2.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the HTTP edge server did not start: {log_path.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()
