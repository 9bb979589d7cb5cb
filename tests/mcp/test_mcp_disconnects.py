"""A client of Rojo's MCP endpoint that goes away before its answer: the SDK's own client,
over HTTP, against a real server process.

The endpoint is stateless, so a `notifications/cancelled` (POSTed on its own by clients of
the 2025 protocol) reaches no call; the client closing the call's connection does (the
2026 protocol's cancellation, and any client that quits). A call that was running then
ends as a stopped turn, its started tool finished whole; a call still waiting for its
turn never runs.
"""

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from roject.identity.tokens import api_token_create
from roject.storage import project_root_create
from rojos.models import Conversation, FileChange, TurnRecord
from tests.support.helpers import assert_history_valid, stored_history
from tests.support.live_server import wait_until
from tests.support.mcp_clients import mcp_url, with_mcp

pytestmark = pytest.mark.django_db(transaction=True)

CANCELLED = "cancelled before its answer"
WAITS = "waits for the one before it"  # logged at DEBUG
# Waits for what a loaded machine may be slow to do; each ends at the event it waits for.
SLOW = 60


# The module's server process: no test here stops or configures it; each reads the log the
# server wrote since it began (module_server), and calls through its own token and project.
MODULE_SERVER_ENV = {
    "ROJO_TOOL_MODULES": "tests.support.held_tools",
    "ROJO_MCP_SERVE_USER_TOOLS": "1",
    "ROJO_LOG_LEVEL": "DEBUG",  # a call seen waiting for its turn
}


@pytest.fixture
def server(module_server):
    return module_server


def _in_a_thread(work):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work()).result()


def _cancellations(server) -> int:
    return server.log().count(CANCELLED)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_client_gone_mid_call_stops_its_turn_and_the_started_tool_finishes_whole(
    server, users, project, mode
):
    """The client cancels a call whose tool is running, and closes its connection (at the
    2026 protocol, "auto", the SDK's cancel closes the call's POST by itself; at 2025,
    "legacy", it POSTs a notifications/cancelled, which reaches nothing, and the call's
    POST closes with the client). The server cancels the call: the tool that started
    finishes (its file stamped once, whole, with its change record), its result is kept,
    the turn is recorded as stopped, and the token's next call runs at once."""
    root = project_root_create(project.pk)
    (root / "a.txt").write_text("")
    secret = api_token_create(user=users["editor"], name="agent").secret
    url = mcp_url(server.base_url, project.pk)

    async def call_then_go():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            held = asyncio.create_task(c.call_tool("stamp_when_released", {"path": "a.txt"}))
            await asyncio.to_thread(wait_until, (root / "a.txt.started").exists, SLOW)
            held.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await held
            if mode == "auto":  # the cancel alone closed the call's POST: the client stays
                await asyncio.to_thread(wait_until, lambda: _cancellations(server), SLOW)

    _in_a_thread(call_then_go)
    wait_until(lambda: _cancellations(server) == 1, SLOW)
    assert (root / "a.txt").read_text() == ""  # still held: the cancel came first
    (root / "a.txt.release").write_text("")
    wait_until(lambda: not TurnRecord.objects.filter(status="running").exists(), SLOW)

    assert (root / "a.txt").read_text() == "stamp\n"
    record = TurnRecord.objects.get()
    assert (record.status, record.error_code) == ("stopped", "stopped")
    conversation = Conversation.objects.get()
    history = stored_history(conversation.pk)
    assert_history_valid(history)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[-1].content == '{"ok": true}'
    assert FileChange.objects.get().tool == "stamp_when_released"
    assert Conversation.objects.get().turn_id is None

    listed = with_mcp(url, secret, lambda c: c.call_tool("list_files", {"path": ""}), mode=mode)
    assert not listed.is_error
    assert TurnRecord.objects.filter(status="done").count() == 1


def test_a_call_waiting_for_its_turn_never_runs_once_its_client_is_gone(server, users, project):
    """Two agents with one token: the second's call waits for the first's; its client goes
    away meanwhile, and when the first call ends the second's never runs: no file, no
    turn, and the conversation is free."""
    root = project_root_create(project.pk)
    (root / "a.txt").write_text("")
    secret = api_token_create(user=users["editor"], name="agent").secret
    url = mcp_url(server.base_url, project.pk)

    async def call(name: str, arguments: dict):
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as c:
            return await c.call_tool(name, arguments)

    async def both():
        first = asyncio.create_task(call("stamp_when_released", {"path": "a.txt"}))
        await asyncio.to_thread(wait_until, (root / "a.txt.started").exists, SLOW)
        second = asyncio.create_task(call("create_directory", {"path": "late"}))
        await asyncio.to_thread(wait_until, lambda: WAITS in server.log(), SLOW)
        second.cancel()  # the client quits: its connection closes
        with contextlib.suppress(asyncio.CancelledError):
            await second
        await asyncio.to_thread(wait_until, lambda: _cancellations(server) == 1, SLOW)
        (root / "a.txt.release").write_text("")
        return await first

    first = _in_a_thread(both)

    assert not first.is_error
    assert "'create_directory'" in server.log()
    assert not (root / "late").exists()
    assert [r.status for r in TurnRecord.objects.all()] == ["done"]
    assert Conversation.objects.get().turn_id is None


def test_a_2025_client_that_cancels_but_stays_connected_is_not_heard(server, users, project):
    """The SDK's client at a 2025 version cancels a running call by POSTing
    notifications/cancelled and keeps the call's connection open (as that protocol says):
    the stateless endpoint cannot route the notification to the call, so the call runs to
    its end, recorded done with its change, and the token's next call waits for it in
    line and then runs; the client drops the late answer (docs/mcp.md)."""
    root = project_root_create(project.pk)
    (root / "a.txt").write_text("")
    secret = api_token_create(user=users["editor"], name="agent").secret
    url = mcp_url(server.base_url, project.pk)

    async def cancel_and_stay():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
        client = Client(streamable_http_client(url, http_client=http), mode="legacy")
        async with http, client as c:
            held = asyncio.create_task(c.call_tool("stamp_when_released", {"path": "a.txt"}))
            await asyncio.to_thread(wait_until, (root / "a.txt.started").exists, SLOW)
            held.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await held
            # Accepted, 202: notifications/initialized's and then notifications/cancelled's.
            accepted = f'"POST /mcp/projects/{project.pk} HTTP/1.1" 202'
            await asyncio.to_thread(wait_until, lambda: server.log().count(accepted) == 2, SLOW)
            following = asyncio.create_task(c.call_tool("create_directory", {"path": "next"}))
            await asyncio.to_thread(wait_until, lambda: WAITS in server.log(), SLOW)
            (root / "a.txt.release").write_text("")
            return await following

    following = _in_a_thread(cancel_and_stay)

    assert not following.is_error
    assert _cancellations(server) == 0
    assert (root / "a.txt").read_text() == "stamp\n" and (root / "next").is_dir()
    assert [r.status for r in TurnRecord.objects.order_by("pk")] == ["done", "done"]
    assert FileChange.objects.filter(tool="stamp_when_released").count() == 1
