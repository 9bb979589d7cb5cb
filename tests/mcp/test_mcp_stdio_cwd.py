"""A stdio MCP server does not run in the project's root: what editors and the rojo write
there is data, never code or configuration the server's command picks up from its working
directory (`python -m` imports from it first; npm, uv and git read their settings there)."""

import sys

import pytest

from rojos.models import RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.mcp_helpers import time_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_module_an_editor_writes_in_the_root_is_not_run_by_the_server(
    client_for, users, project, fake_provider, tmp_path
):
    """An editor writes mcp_server_time.py in the project's root; the time server, started
    as documented (`python -m mcp_server_time`), runs its own module, not the editor's."""
    marker = tmp_path / "ran-on-the-server"
    planted = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('code of an editor')\n"
    editor = client_for(users["editor"])
    written = editor.post(
        f"/api/projects/{project.pk}/files/new",
        json={"path": "mcp_server_time.py", "text": planted},
    )
    assert written.status_code == 200, written.text
    rojo = make_rojo(fake_provider.base_url)
    server = time_server(command=sys.executable, args=["-m", "mcp_server_time"])
    RojoMcpServer.objects.create(rojo=rojo, server=server)
    fake_provider.add(
        stream(*tool_call_chunks([("time__get_current_time", {"timezone": "UTC"})])),
        stream(*text_chunks("It is now.")),
    )

    events = editor.chat(project.pk, rojo=rojo.slug, message="What time is it?")

    assert not marker.exists()
    result = next(e for e in events if e.type == "TOOL_RESULT")
    assert result.data["ok"], result.data
    assert "datetime" in str(result.data), result.data
