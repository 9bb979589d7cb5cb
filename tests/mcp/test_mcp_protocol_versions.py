"""Protocol versions: Rojo's MCP client speaks the newest version its SDK knows (2026-07-28,
opened with `server/discover`) and negotiates down, through the initialize handshake, to
the version an older server answers. Against real servers over stdio: the edge server (the
SDK's, current) and tests/support/mcp_servers/legacy.py (by hand, an older version)."""

import json
import sys
from pathlib import Path

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_PROTOCOL_VERSION

from rojos.mcp.connection import McpConnection
from rojos.mcp.spec import ServerSpec
from tests.support.mcp_helpers import EDGE

LEGACY = str(Path(EDGE).parent / "legacy.py")


async def test_a_current_server_is_spoken_to_at_the_newest_version(root):
    """The SDK's own server answers the `server/discover` probe: the session is at the
    newest version, and its tools are called."""
    spec = ServerSpec(
        slug="edge", name="Edge", transport="stdio", command=sys.executable,
        args=(EDGE, "{project_root}/edge.pid"),
    )  # fmt: skip
    connection = McpConnection(spec, root)
    try:
        assert "echo" in {tool.name for tool in await connection.tools()}
        result = await connection.call("echo", {"text": "hi"})
        assert connection.protocol_version == LATEST_PROTOCOL_VERSION == "2026-07-28"
        assert result.content[0].text == "hi"
    finally:
        await connection.aclose()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_an_older_server_is_spoken_to_at_its_own_version(root, version):
    """A server that knows no `server/discover` refuses the probe; the client then offers
    the newest handshake version and takes the older one the server answers."""
    spec = ServerSpec(
        slug="legacy", name="Legacy", transport="stdio", command=sys.executable,
        args=(LEGACY, version),
    )  # fmt: skip
    connection = McpConnection(spec, root)
    try:
        assert [tool.name for tool in await connection.tools()] == ["history"]
        result = await connection.call("history", {})
    finally:
        await connection.aclose()
    assert connection.protocol_version == version
    history = json.loads(result.content[0].text)
    assert history[:3] == [
        {"method": "server/discover", "protocolVersion": LATEST_PROTOCOL_VERSION},
        {"method": "initialize", "protocolVersion": LATEST_HANDSHAKE_VERSION},
        {"method": "notifications/initialized", "protocolVersion": None},
    ]
    assert [entry["method"] for entry in history[3:]] == ["tools/list", "tools/call"]
