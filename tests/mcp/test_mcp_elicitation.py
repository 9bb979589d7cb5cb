"""Questions from MCP servers during a call (elicitation): the person whose turn it is sees
the server's form, answers it through the API, and the answer reaches the server; a decline
and a timeout each end the call with a clear result; the turn's history keeps it all; and a
question nobody can answer (a call with no person behind it) is declined at once."""

import asyncio
import os
import sys
from pathlib import Path

import pytest
from django.db import connection

from roject.storage import project_root_create
from rojos.mcp.pool import mcp_pool, mcp_pool_close
from rojos.mcp.questions import Answer, questions_to
from rojos.mcp.spec import ServerSpec
from rojos.models import McpServer, Message, RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)

ASKING = str(Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "asking.py")


def asking_server(era: str = "2026") -> McpServer:
    """The asking server, speaking the 2026 protocol (the question in the call's result) or
    only the 2025 one (the question a request of its own, on the shared session)."""
    return McpServer.objects.create(
        trusted=True,
        name="Asking",
        slug="asking",
        transport="stdio",
        command=sys.executable,
        args=[ASKING] if era == "2026" else [ASKING, "legacy"],
    )


ERAS = pytest.mark.parametrize("era", ["2026", "2025"])


def _turn(project, fake_provider, settings, tool="greet", era="2026"):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the server stops soon after the test
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=asking_server(era))
    fake_provider.add(
        stream(*tool_call_chunks([(f"asking__{tool}", {})])),
        stream(*text_chunks("Done.")),
    )
    return rojo


def _asked_and_answered(client, project, rojo, answer: dict | None, stop=False, **chat):
    """Run the turn; answer the question with `answer` (None: leave it unanswered; `stop`:
    stop the turn instead)."""
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Greet me", **chat) as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "QUESTION")
        conversation, question = seen[0].data["conversation"], seen[-1].data
        if stop:
            stopped = client.post(f"/api/conversations/{conversation}/stop")
            assert stopped.status_code == 200, stopped.text
        if answer is not None:
            sent = client.post(
                f"/api/conversations/{conversation}/answer",
                json={"question": question["id"], **answer},
            )
            assert sent.status_code == 200, sent.text
        rest = list(events)
    return conversation, question, rest


def _result(events) -> dict:
    [result] = [e.data for e in events if e.type == "TOOL_RESULT"]
    return result


@ERAS
def test_the_servers_form_is_answered_and_the_answer_reaches_the_server(
    client_for, users, project, fake_provider, settings, era
):
    rojo = _turn(project, fake_provider, settings, era=era)
    editor = client_for(users["editor"])
    answer = {"action": "accept", "content": {"name": "Ada", "times": 2}}
    conversation, question, rest = _asked_and_answered(editor, project, rojo, answer)
    assert question["message"] == "What is your name?"
    assert question["mode"] == "form"
    assert question["user"] == "editor", "the page shows the form to this person only"
    assert question["call"], "the question names the call it belongs to"
    assert set(question["schema"]["properties"]) == {"name", "times"}
    [answered] = [e.data for e in rest if e.type == "ANSWERED"]
    assert answered["action"] == "accept"
    result = _result(rest)
    assert result["ok"], result
    assert result["result"] == "Hello, Ada! Hello, Ada!"
    stored = Message.objects.get(conversation_id=conversation, role=Message.Role.TOOL)
    [kept] = stored.extra["questions"]
    assert kept["message"] == "What is your name?"
    assert kept["answer"]["content"] == {"name": "Ada", "times": 2}
    replayed = editor.get(f"/api/conversations/{conversation}").json()["events"]
    kinds = [e["type"] for e in replayed if e["type"] in ("TOOL_CALL", "QUESTION", "ANSWERED")]
    assert kinds == ["TOOL_CALL", "QUESTION", "ANSWERED"], replayed
    exported = editor.get(f"/api/conversations/{conversation}/export?format=markdown").text
    assert "- Asking asked: `What is your name?`" in exported
    assert '- answered: accept `{"name": "Ada", "times": 2}`' in exported
    assert "- ⚙ `asking__greet` `{}` → ok" in exported


def test_a_schema_default_fills_a_field_the_form_left_out(
    client_for, users, project, fake_provider, settings
):
    rojo = _turn(project, fake_provider, settings)
    editor = client_for(users["editor"])
    answer = {"action": "accept", "content": {"name": "Bo"}}
    _, _, rest = _asked_and_answered(editor, project, rojo, answer)
    assert _result(rest)["result"] == "Hello, Bo!"


@pytest.mark.parametrize(
    ("content", "got"),
    [
        ({}, "toppings: cheese, olives; crust: thin; note: Ring twice"),
        (
            {"toppings": ["ham"], "crust": None, "note": None},
            "toppings: ham; crust: left out; note: left out",
        ),
    ],
    ids=["fields-left-out", "fields-emptied"],
)
def test_a_field_left_out_takes_its_default_and_one_emptied_is_left_out(
    client_for, users, project, fake_provider, settings, content, got
):
    """A schema's default is where the form starts (SEP-1034): a field an answer left out
    (a script's, which saw no form) takes it; one the person emptied in the form (sent as
    null) reaches the server left out, never as the default they removed nor as a null
    that the field's type does not allow."""
    rojo = _turn(project, fake_provider, settings, tool="order")
    editor = client_for(users["editor"])
    _, _, rest = _asked_and_answered(
        editor, project, rojo, {"action": "accept", "content": content}
    )
    assert _result(rest)["result"] == got


@ERAS
def test_a_decline_ends_the_call_with_a_clear_result(
    client_for, users, project, fake_provider, settings, era
):
    rojo = _turn(project, fake_provider, settings, era=era)
    editor = client_for(users["editor"])
    _, _, rest = _asked_and_answered(editor, project, rojo, {"action": "decline"})
    result = _result(rest)
    assert result["result"] == {
        "result": "no greeting: the user answered decline",
        "question": "the person declined the question the server asked",
    }


@ERAS
def test_a_question_left_unanswered_is_cancelled_when_its_time_runs_out(
    client_for, users, project, fake_provider, settings, era
):
    settings.ROJO_ELICITATION_SECONDS = 0.5
    rojo = _turn(project, fake_provider, settings, era=era)
    editor = client_for(users["editor"])
    _, question, rest = _asked_and_answered(editor, project, rojo, None)
    assert question["seconds"] == 0.5
    [answered] = [e.data for e in rest if e.type == "ANSWERED"]
    assert answered["action"] == "cancel" and answered["timed_out"]
    result = _result(rest)["result"]
    assert result["result"] == "no greeting: the user answered cancel"
    assert "no answer in time" in result["question"]


def test_only_the_turns_own_user_may_answer(client_for, users, project, fake_provider, settings):
    rojo = _turn(project, fake_provider, settings)
    editor, owner = client_for(users["editor"]), client_for(users["owner"])
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Greet me") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "QUESTION")
        conversation, question = seen[0].data["conversation"], seen[-1].data["id"]
        url = f"/api/conversations/{conversation}/answer"
        other = owner.post(url, json={"question": question, "action": "accept", "content": {}})
        assert other.status_code == 409, other.text
        mine = editor.post(url, json={"question": question, "action": "cancel"})
        assert mine.status_code == 200, mine.text
        rest = list(events)
    [answered] = [e.data for e in rest if e.type == "ANSWERED"]
    assert answered["action"] == "cancel" and not answered["timed_out"]


def test_a_url_question_is_offered_as_a_link(client_for, users, project, fake_provider, settings):
    rojo = _turn(project, fake_provider, settings, tool="visit", era="2025")
    editor = client_for(users["editor"])
    _, question, rest = _asked_and_answered(editor, project, rojo, {"action": "accept"})
    assert question["mode"] == "url"
    assert question["url"] == "https://example.com/sign-up"
    assert _result(rest)["result"] == "the user answered accept"


@ERAS
def test_a_question_nobody_can_answer_is_declined_at_once(tmp_path, era):
    """A call with no person behind it (an outside agent's, a script's) gets a decline."""
    spec = ServerSpec.of(asking_server(era))

    async def run():
        connection = mcp_pool().connection(spec, tmp_path)
        try:
            with questions_to(None):
                return await connection.call("greet", {})
        finally:
            await mcp_pool_close()

    result = asyncio.run(run())
    assert result.content[0].text == "no greeting: the user answered decline"


def test_an_answer_through_another_process_reaches_the_turn(
    server_process, client_for, users, project, fake_provider, settings
):
    """The question waits in the process running the turn; the answer, and a refusal of
    someone else's, come through another one (over the relay's control layer)."""
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("runs with REDIS_URL and a PostgreSQL DATABASE_URL set")
    other = server_process(ROJO_PROVIDER_RETRIES="0")
    rojo = _turn(project, fake_provider, settings, era="2025")
    editor = client_for(users["editor"])
    editor_on_two = client_for(users["editor"], base_url=other.base_url)
    owner_on_two = client_for(users["owner"], base_url=other.base_url)
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Greet me") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "QUESTION")
        conversation, question = seen[0].data["conversation"], seen[-1].data["id"]
        url = f"/api/conversations/{conversation}/answer"
        answer = {"question": question, "action": "accept", "content": {"name": "Cy"}}
        refused = owner_on_two.post(url, json=answer)
        sent = editor_on_two.post(url, json=answer)
        rest = list(events)
    assert refused.status_code == 409, refused.text
    assert sent.status_code == 200, sent.text
    assert _result(rest)["result"] == "Hello, Cy!"


@pytest.mark.parametrize(
    ("era", "greetings"),
    [
        # Each question comes with its own call: each person answers their own.
        ("2026", ["Hello, Ann!", "Hello, Ben!"]),
        # The questions come on the shared session, which of the two calls each belongs to
        # is not said: neither person is asked, both are declined.
        ("2025", ["no greeting: the user answered decline"] * 2),
    ],
)
def test_questions_during_two_calls_on_a_shared_session_reach_no_wrong_person(
    tmp_path, era, greetings
):
    spec = ServerSpec.of(asking_server(era))
    asked: list[str] = []

    def person(name: str):
        async def ask(question, *, call):
            asked.append(name)
            return Answer(action="accept", content={"name": name})

        return ask

    async def call_as(connection, name: str):
        with questions_to(person(name)):
            return await connection.call("greet", {})

    async def run():
        connection = mcp_pool().connection(spec, tmp_path)
        try:
            return await asyncio.gather(call_as(connection, "Ann"), call_as(connection, "Ben"))
        finally:
            await mcp_pool_close()

    results = asyncio.run(run())
    assert [r.content[0].text for r in results] == greetings
    assert sorted(asked) == (["Ann", "Ben"] if era == "2026" else [])


def test_a_turn_stopped_while_its_question_waits_ends_and_the_session_goes_on(
    client_for, users, project, fake_provider, settings
):
    """Stop ends the reply at once (the server is told cancel), and the server's session,
    shared by the project's turns, is not left waiting: the next turn's question is asked."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MCP_IDLE_SECONDS = 2
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=asking_server("2025"))
    fake_provider.add(
        stream(*tool_call_chunks([("asking__greet", {})])),
        stream(*tool_call_chunks([("asking__greet", {})])),
        stream(*text_chunks("Done.")),
    )
    editor = client_for(users["editor"])
    _, _, first = _asked_and_answered(editor, project, rojo, None, stop=True)
    assert [e.type for e in first[-2:]] == ["ERROR", "DONE"]
    assert first[-2].data["code"] == "stopped"
    conversation = Message.objects.get(role=Message.Role.USER).conversation_id
    answer = {"action": "accept", "content": {"name": "Di"}}
    _, _, second = _asked_and_answered(editor, project, rojo, answer, conversation=conversation)
    assert _result(second)["result"] == "Hello, Di!"
