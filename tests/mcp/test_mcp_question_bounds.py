"""A server's questions are bounded: one the chat could not show whole (a message of a
hundred thousand characters, a form of five hundred fields, a list box of five thousand
choices) is declined without reaching the page or the stored result, and a call that asks
again and again is declined past MAX_QUESTIONS. The server is real (stdio), the chat a real
HTTP request to the app, the model the fake provider."""

import json
import sys
from pathlib import Path

import pytest

from roject.storage import project_root_create
from rojos.mcp.questions import MAX_QUESTIONS
from rojos.models import McpServer, Message, RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)

PESTERING = str(Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "pestering.py")


def _rojo(project, fake_provider, settings, tool: str, arguments: dict):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the server stops soon after the test
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    server = McpServer.objects.create(
        trusted=True,
        name="Pestering",
        slug="pestering",
        transport="stdio",
        command=sys.executable,
        args=[PESTERING],
    )
    RojoMcpServer.objects.create(rojo=rojo, server=server)
    fake_provider.add(
        stream(*tool_call_chunks([(f"pestering__{tool}", arguments)])),
        stream(*text_chunks("Done.")),
    )
    return rojo


@pytest.mark.parametrize("tool", ["long_question", "wide_form", "long_list"])
def test_a_question_too_big_to_show_is_declined_unseen(
    client_for, users, project, fake_provider, settings, tool
):
    rojo = _rojo(project, fake_provider, settings, tool, {})
    editor = client_for(users["editor"])
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = list(parse_sse(response.iter_lines()))
    assert [e for e in events if e.type == "QUESTION"] == [], "nobody is shown it"
    [result] = [e.data for e in events if e.type == "TOOL_RESULT"]
    assert result["result"] == "the user answered decline", result
    conversation = events[0].data["conversation"]
    stored = Message.objects.get(conversation_id=conversation, role=Message.Role.TOOL)
    assert "questions" not in (stored.extra or {}), "nothing of it is kept"
    assert sum(len(json.dumps(e.data)) for e in events) < 20_000, "the stream carries none of it"


def test_a_call_asking_again_and_again_is_declined_past_the_bound(
    client_for, users, project, fake_provider, settings
):
    times = MAX_QUESTIONS + 5
    rojo = _rojo(project, fake_provider, settings, "pester", {"times": times})
    editor = client_for(users["editor"])
    asked = 0
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = []
        for event in parse_sse(response.iter_lines()):
            events.append(event)
            if event.type == "QUESTION":
                asked += 1
                sent = editor.post(
                    f"/api/conversations/{events[0].data['conversation']}/answer",
                    json={"question": event.data["id"], "action": "accept",
                          "content": {"name": "Ada"}},
                )  # fmt: skip
                assert sent.status_code == 200, sent.text
    assert asked == MAX_QUESTIONS
    [result] = [e.data for e in events if e.type == "TOOL_RESULT"]
    said = result["result"]
    actions = (said["result"] if isinstance(said, dict) else said).split()
    assert actions == ["accept"] * MAX_QUESTIONS + ["decline"] * 5, result
    stored = Message.objects.get(
        conversation_id=events[0].data["conversation"], role=Message.Role.TOOL
    )
    assert len(stored.extra["questions"]) == MAX_QUESTIONS
