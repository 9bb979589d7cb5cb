"""MCP tools in the running app: a Stop cancels a call that hangs, and no stdio server
outlives the app's process, whether it is stopped or killed."""

import signal
import time

import pytest

from rojos.models import RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo, stored_history
from tests.support.live_server import parse_sse, read_until, wait_until
from tests.support.mcp_helpers import alive, edge_server, wait_gone

pytestmark = pytest.mark.django_db(transaction=True)


def pid_of(project) -> int:
    from roject.storage import project_root

    path = project_root(project.pk) / "edge.pid"
    deadline = time.monotonic() + 60  # the server's start, on a loaded machine
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


def test_stop_cancels_a_hanging_mcp_call_at_once(
    client_for, users, project, fake_provider, settings, caplog
):
    """The call would wait a minute (ROJO_MCP_CALL_TIMEOUT); Stop ends it now, the call is
    answered as interrupted, and the idle server is stopped afterwards. The Stop goes once
    the server said (on its stderr, in the log) that the call came."""
    caplog.set_level("INFO", logger="rojos.mcp")
    settings.ROJO_MCP_IDLE_SECONDS = 1
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server())
    fake_provider.add(stream(*tool_call_chunks([("edge__hang", {})])))
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Wait") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "TOOL_CALL")
        conversation = seen[0].data["conversation"]
        wait_until(lambda: "edge server: hanging" in caplog.text, timeout=60)
        assert client.post(f"/api/conversations/{conversation}/stop").status_code == 200
        rest = [(e.type, e.data) for e in events]

    assert [kind for kind, _ in rest] == ["TOOL_RESULT", "ERROR", "DONE"]
    assert rest[0][1]["result"] == {"error": "interrupted"}  # not the call's timeout
    assert rest[1][1]["code"] == "stopped"
    assert [m.role for m in stored_history(conversation)] == ["user", "assistant", "tool"]
    assert wait_gone(pid_of(project), 15)


@pytest.mark.parametrize(
    ("server", "how"), [("uvicorn", "stop"), ("daphne", "stop"), ("uvicorn", "kill")]
)
def test_no_stdio_server_outlives_the_app_process(
    server, how, server_process, client_for, users, project, fake_provider
):
    """The app's process runs a turn that starts the edge server; once the process is
    stopped (SIGTERM: its loop ends the session) or killed (SIGKILL: the server reads the
    end of its stdin), the server's process is gone."""
    app = server_process(server, ROJO_PROVIDER_RETRIES="0")
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server())
    client = client_for(users["editor"], base_url=app.base_url)
    pids = []
    for text in ("hi", "again"):
        fake_provider.add(
            stream(*tool_call_chunks([("edge__echo", {"text": text})])),
            stream(*text_chunks("Done.")),
        )
        events = client.chat(project.pk, rojo=rojo.slug, message="Echo")
        result = next(e for e in events if e.type == "TOOL_RESULT")
        assert result.data["ok"] and result.data["result"] == text
        pids.append(pid_of(project))
    pid = pids[0]
    assert pids == [pid, pid] and alive(pid)  # one process, reused across turns

    if how == "stop":
        app.process.send_signal(signal.SIGTERM)
        app.process.wait(timeout=15)
    else:
        app.kill()
    assert wait_gone(pid, 15), f"the MCP server {pid} outlived the app ({how})"
    if how == "stop":  # the server's stderr went to the app's log
        assert "MCP server edge: edge server started" in app.log()
