"""Progress of a long MCP tool call: each call carries a progressToken, the server's reports
reach the turn throttled and bounded, and each report starts ROJO_MCP_CALL_TIMEOUT again (a
call that keeps reporting runs on, one that falls silent is still cut, and
ROJO_MCP_CALL_MAX_SECONDS bounds it all), against tests/support/mcp_servers/progress.py."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from roject.storage import project_root_create
from rojos.mcp.pool import mcp_pool, mcp_pool_close
from rojos.mcp.progress import MESSAGE_CHARS, CallProgress, Progress, progress_in_task
from rojos.mcp.questions import call_questions
from rojos.mcp.spec import McpLink, ServerSpec
from rojos.mcp.tools import TurnTools
from rojos.models import RojoMcpServer
from rojos.tools import RojoToolContext, ToolCall, registry
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse
from tests.support.mcp_helpers import progress_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def pool():
    yield mcp_pool()
    await mcp_pool_close()


async def reported_call(root, name: str, args: dict) -> tuple[object, list[Progress]]:
    """Call a tool of the progress server as a turn does: its reports, as the turn gets them."""
    server = await sync_to_async(progress_server)()
    link = McpLink(spec=ServerSpec.of(server), tools=None, ask_before=False, trusted=True)
    tools = TurnTools(registry, (link,))
    ctx = RojoToolContext(project_id=1, project_root=root, role="editor")
    await tools.prepare(ctx)
    reports: list[Progress] = []

    async def in_a_turn():
        progress_in_task(reports.append)  # as the turn's runner binds it
        with call_questions("call_1"):
            return await tools.run(ToolCall.parse("call_1", name, args), ctx)

    return await asyncio.create_task(in_a_turn()), reports


async def test_a_call_that_keeps_reporting_outlives_the_call_timeout(pool, tmp_path, settings):
    """Eight reports half a second apart: twice ROJO_MCP_CALL_TIMEOUT, and it answers. (Two
    reports a loaded machine delivers within the throttle's interval go as the later one.)"""
    settings.ROJO_MCP_CALL_TIMEOUT = 2
    outcome, reports = await reported_call(tmp_path, "progress__steady", {"steps": 8, "every": 0.5})
    assert outcome.ok and outcome.value == "done after 8 steps", outcome
    progress = [r.progress for r in reports]
    assert progress == sorted(set(progress)) and len(progress) >= 4
    assert reports[-1] == Progress(call="call_1", progress=8, total=8, message="Fetching page 8")


async def test_a_call_that_falls_silent_is_still_cut(pool, tmp_path, settings):
    """Its three reports came over a second and a half (the timeout started again at each),
    then nothing for ROJO_MCP_CALL_TIMEOUT: cancelled, and the model told why."""
    settings.ROJO_MCP_CALL_TIMEOUT = 2
    outcome, reports = await reported_call(
        tmp_path, "progress__falls_silent", {"steps": 3, "every": 0.5}
    )
    assert not outcome.ok and "did not answer within 2 s" in outcome.error, outcome
    assert "counted again from each progress report" in outcome.error
    assert [r.progress for r in reports] == sorted({r.progress for r in reports})
    assert reports[-1] == Progress(call="call_1", progress=3, message="step 3")


async def test_progress_does_not_lift_the_calls_whole_bound(pool, tmp_path, settings):
    settings.ROJO_MCP_CALL_TIMEOUT = 2
    settings.ROJO_MCP_CALL_MAX_SECONDS = 3
    outcome, reports = await reported_call(
        tmp_path, "progress__steady", {"steps": 20, "every": 0.4}
    )
    assert not outcome.ok and "did not finish within 3 s" in outcome.error, outcome
    assert "ROJO_MCP_CALL_MAX_SECONDS" in outcome.error
    assert 1 <= len(reports) < 20


async def test_a_chatty_server_is_throttled_and_its_last_report_kept(pool, tmp_path):
    """A thousand reports at once reach the turn as a few; the last comes before the result,
    its message on one line and cut."""
    outcome, reports = await reported_call(tmp_path, "progress__chatty", {"count": 1000})
    assert outcome.ok and outcome.value == "sent 1000 reports"
    assert len(reports) < 100
    progress = [r.progress for r in reports]
    assert progress == sorted(progress)
    last = reports[-1]
    assert (last.progress, last.total) == (1000, 1000)
    assert last.message.startswith("last <b>line</b> xxx") and len(last.message) == MESSAGE_CHARS
    assert last.message.endswith("…") and "\n" not in last.message


async def test_reports_held_in_an_interval_give_way_to_the_last():
    """Within one interval only the first goes at once; at the call's end the last held one
    goes, and nothing after it."""
    sent: list[Progress] = []
    progress = CallProgress("c", sent.append, seconds=60)
    for step in range(1, 11):
        progress.report(step, 10, None)
    progress.close()
    progress.report(11, 10, "late")
    assert [p.progress for p in sent] == [1, 10]


def test_a_reattach_gets_a_calls_latest_progress_alone(
    client_for, users, project, fake_provider, settings
):
    """A page that follows the turn gets every report as it comes; one that re-attaches from
    the start gets the call's latest only. Before, the turn's log kept every report (up to
    four a second: 7,200 for a half-hour call), and a re-attach replayed them all."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the server stops soon after the test
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=progress_server(), ask_before=False)
    fake_provider.add(
        stream(*tool_call_chunks([("progress__steady", {"steps": 6, "every": 0.4})])),
        stream(*text_chunks("Fetched.")),
    )
    client = client_for(users["editor"])

    live = client.chat(project.pk, rojo=rojo.slug, message="Fetch the pages")
    conversation = live[0].data["conversation"]
    again = client.get(f"/api/conversations/{conversation}/stream", headers={"Last-Event-ID": "0"})

    assert live[-1].type == "DONE" and "ERROR" not in [e.type for e in live]
    followed = [e.data["progress"] for e in live if e.type == "TOOL_PROGRESS"]
    assert len(followed) > 1 and followed[-1] == 6  # (reports a loaded machine sent
    # within the throttle's interval go as the later one)
    replayed = list(parse_sse(again.text.splitlines()))
    assert [(e.type, e.data["progress"]) for e in replayed if e.type == "TOOL_PROGRESS"] == [
        ("TOOL_PROGRESS", 6)
    ]
    assert [e.type for e in replayed] == [
        e.type for e in live if e.type != "TOOL_PROGRESS" or e.data["progress"] == 6
    ]
    assert [e.id for e in replayed] == [
        e.id for e in live if e.type != "TOOL_PROGRESS" or e.data["progress"] == 6
    ]
