"""A rojo calling MCP tools in a real turn (the chat command, the fake provider), and the
MCP commands of docs/mcp.md, run as written."""

import contextlib
import io
import json
import os
import re
import shlex
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command
from django.db.backends.utils import CursorWrapper

from roject.storage import project_root
from rojos.models import McpServer, Message, Rojo, RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.mcp_helpers import edge_server, time_server, wait_gone

pytestmark = pytest.mark.django_db(transaction=True)
MCP_DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def chat(message: str, *, user="editor", yes=False) -> list[dict]:
    out = io.StringIO()
    with contextlib.suppress(SystemExit):  # exit 1 when a turn ends with an error
        call_command(
            "chat",
            message,
            project="demo-project",
            rojo="test-rojo",
            user=user,
            format="ndjson",
            yes=yes,
            stdout=out,
        )
    return [json.loads(line) for line in out.getvalue().splitlines()]


def results(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "TOOL_RESULT"]


def offered(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", ())}


def test_rojo_calls_the_time_server_and_its_process_is_gone_after(project, fake_provider):
    """The model is offered time__* tools, its call runs on the real server, the result
    reaches the model, the activity line says MCP (not undoable), and once the command's
    loop ends no server process is left."""
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=time_server())
    fake_provider.add(
        stream(*tool_call_chunks([("time__get_current_time", {"timezone": "UTC"})])),
        stream(*text_chunks("It is now.")),
    )

    events = chat("What time is it in UTC?")

    assert [e["type"] for e in events][-1] == "DONE"
    (result,) = results(events)
    assert result["ok"] and result["result"]["timezone"] == "UTC"
    assert result["mcp"] == {"server": "Time", "undoable": False}
    assert "time__get_current_time" in offered(fake_provider.requests[0])
    sent_back = fake_provider.requests[1]["messages"][-1]
    assert sent_back["role"] == "tool" and '"timezone": "UTC"' in sent_back["content"]
    stored = Message.objects.get(role="tool")
    assert stored.extra["mcp_server"] == "Time"


def test_a_writing_mcp_tool_asks_first_and_no_stdio_child_survives(project, fake_provider):
    """Not read-only: without --yes nobody approves, so it is denied and never runs; with
    --yes it runs in the project's root. The edge server's pid is gone after each run."""
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server())
    note = {"name": "note.txt", "text": "from MCP"}
    fake_provider.add(
        stream(*tool_call_chunks([("edge__write_note", note)])),
        stream(*text_chunks("Denied.")),
        stream(*tool_call_chunks([("edge__write_note", note)])),
        stream(*text_chunks("Written.")),
    )
    root = project_root(project.pk)

    denied = chat("Write a note")
    assert [e["type"] for e in denied].count("APPROVAL_REQUIRED") == 1
    approval = next(e for e in denied if e["type"] == "APPROVAL_REQUIRED")
    assert approval["preview"]["mcp"]["tool"] == "write_note"
    assert results(denied)[0]["result"] == {"error": "denied by the user"}
    assert not (root / "note.txt").exists()
    first = int((root / "edge.pid").read_text())
    assert wait_gone(first)

    approved = chat("Write a note", yes=True)
    assert results(approved)[0]["ok"]
    assert (root / "note.txt").read_text() == "from MCP"
    assert wait_gone(int((root / "edge.pid").read_text()))


def test_viewers_rojo_is_offered_only_read_only_mcp_tools(project, fake_provider):
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server())
    fake_provider.add(stream(*text_chunks("Hello.")))

    chat("Hi", user="viewer")

    names = offered(fake_provider.requests[0])
    assert "edge__echo" in names and "edge__where" in names
    assert "edge__write_note" not in names and "edge__crash" not in names


@contextlib.contextmanager
def counted_queries():
    """Every query any thread runs (a turn's ORM calls run on a thread of its own)."""
    count = []
    original = CursorWrapper.execute

    def execute(self, sql, params=None):
        count.append(sql)
        return original(self, sql, params)

    with mock.patch.object(CursorWrapper, "execute", execute):
        yield count


def test_an_mcp_call_costs_a_step_no_more_queries_than_a_built_in_one(
    project, fake_provider, settings
):
    """The same turn (a read-only call, then the answer) with a built-in tool and with an
    MCP tool: the same number of queries (tool lists come from the session, not the
    database). The MCP server's start takes seconds on a loaded machine: the turn's
    heartbeat and draft timers are set long, so that only the work is counted, not time."""
    settings.ROJO_TURN_HEARTBEAT_SECONDS = 600
    settings.ROJO_DRAFT_SECONDS = 600
    plain = make_rojo(fake_provider.base_url)
    with_mcp = make_rojo(fake_provider.base_url, name="Clock", slug="clock")
    RojoMcpServer.objects.create(rojo=with_mcp, server=edge_server())
    counts = {}
    for rojo, tool, args in (
        (plain, "read_path_meta", {"path": ""}),
        (with_mcp, "edge__echo", {"text": "hi"}),
    ):
        fake_provider.add(
            stream(*tool_call_chunks([(tool, args)])),
            stream(*tool_call_chunks([(tool, args)])),
            stream(*text_chunks("Done.")),
        )
        out = io.StringIO()
        with counted_queries() as queries:
            call_command(
                "chat",
                "Go",
                project="demo-project",
                rojo=rojo.slug,
                user="editor",
                format="ndjson",
                stdout=out,
            )
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [e["ok"] for e in results(events)] == [True, True]
        counts[tool] = queries
    assert len(counts["read_path_meta"]) > 10  # every thread's queries were counted
    assert len(counts["edge__echo"]) == len(counts["read_path_meta"]), counts


def readme_mcp_commands() -> list[list[str]]:
    text = MCP_DOC.read_text()
    match = re.search(r"<!-- example: mcp tools -->\s*```sh\n(.*?)```", text, re.S)
    assert match, "the MCP example of docs/mcp.md is missing"
    joined = match.group(1).replace("\\\n", " ")
    lines = [os.path.expandvars(line) for line in joined.splitlines() if line.strip()]
    return [shlex.split(line) for line in lines]


def test_readme_mcp_commands_work_as_written(project, fake_provider, monkeypatch):
    """The create_mcp_server and create_rojo --mcp-servers lines, then a chat."""
    monkeypatch.setenv("ROJO_KEY_OPENAI", "sk-test")
    commands = readme_mcp_commands()
    printed = []
    for words in commands:
        assert words[:2] == [".venv/bin/python", "manage.py"], words
        if words[2] == "chat":
            continue
        out = io.StringIO()
        call_command(*words[2:], stdout=out)
        printed.append(out.getvalue().strip())
    assert printed[:3] == ["time", "files", "tracker"]
    time_ = McpServer.objects.get(slug="time")
    assert time_.transport == "stdio" and time_.args == ["-m", "mcp_server_time"]
    assert Path(time_.command).is_absolute()
    assert time_.trusted and not McpServer.objects.get(slug="files").trusted
    tracker = McpServer.objects.get(slug="tracker")
    assert tracker.headers_from == {"Authorization": "TRACKER_AUTH"}
    files = McpServer.objects.get(slug="files")
    assert "{project_root}" in files.args
    rojo = Rojo.objects.get(slug=printed[-1])
    assert sorted(rojo.mcp_links.values_list("server__slug", flat=True)) == ["files", "time"]
