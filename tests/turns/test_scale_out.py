"""Scale-out: two server processes on one PostgreSQL database, one Redis and one storage dir.

A conversation runs on each at once; a second message, a Stop and an approval each go to the
process that is not running the turn, and reach it through the database or the channel layer.
"""

import os
import threading

import pytest
from django.db import connection

from roject.storage import project_root_create
from rojos.models import Conversation, FileChange, TurnRecord
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import (
    assert_history_valid,
    big_text,
    files_in,
    make_rojo,
    stored_history,
)
from tests.support.live_server import Event, parse_sse, read_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

B_REPLY = "b.txt is rewritten."

# The second process; no test here stops it or sets its settings, so they share the module's.
MODULE_SERVER_ENV = {"ROJO_PROVIDER_RETRIES": "0", "ROJO_APPROVAL_TIMEOUT": "30"}


@pytest.fixture
def other_process(request, settings):
    """A second server process beside the in-process one, as in a deployment of several
    (taken once the skip is decided: a run without PostgreSQL and Redis starts none)."""
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("scale-out runs with REDIS_URL and a PostgreSQL DATABASE_URL set")
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_APPROVAL_TIMEOUT = 30
    return request.getfixturevalue("module_server")


def write(path: str, text: str) -> tuple[str, dict]:
    return ("write_text_content", {"path": path, "text": text})


def held_text(words: int, held: threading.Event, delay: float):
    """`words` paced pieces that hold after the tenth until `held` is set: the turn still
    runs when the test acts on it, however slowly a loaded server gets there."""
    chunks = text_chunks("w " * words, pieces=words)
    chunks.insert(10, Gate(held))
    return stream(*chunks, delay=delay)


def chat_text(events: list[Event]) -> str:
    return "".join(event.data["text"] for event in events if event.type == "CHAT")


def test_two_processes_share_turn_claims_stops_approvals_history_and_files(
    other_process, client_for, users, project, fake_provider
):
    root = project_root_create(project.pk)
    (root / "b.txt").write_text("b before\n")
    a_text, b_text = big_text("a"), big_text("b")
    rojo = make_rojo(fake_provider.base_url)
    a_stopped = threading.Event()  # a's reply holds until the Stop was answered
    fake_provider.add(
        stream(*tool_call_chunks([write("a.txt", a_text)], arguments="whole")),
        held_text(200, a_stopped, delay=0.05),
        stream(*tool_call_chunks([write("b.txt", b_text)], arguments="whole")),
        stream(*text_chunks(B_REPLY)),
    )
    editor_on_one = client_for(users["editor"])
    editor_on_two = client_for(users["editor"], base_url=other_process.base_url)
    owner_on_two = client_for(users["owner"], base_url=other_process.base_url)

    with editor_on_one.chat_stream(project.pk, rojo=rojo.slug, message="Write a") as a_stream:
        a_events = parse_sse(a_stream.iter_lines())
        a_seen = read_until(a_events, "CHAT")
        a_conversation = a_seen[0].data["conversation"]
        with owner_on_two.chat_stream(project.pk, rojo=rojo.slug, message="Write b") as b_stream:
            b_events = parse_sse(b_stream.iter_lines())
            b_seen = read_until(b_events, "APPROVAL_REQUIRED")
            b_conversation = b_seen[0].data["conversation"]

            busy = editor_on_two.post(
                f"/api/projects/{project.pk}/chat",
                json={"rojo": rojo.slug, "message": "Also", "conversation": a_conversation},
            )
            approved = editor_on_one.post(
                f"/api/conversations/{b_conversation}/approve",
                json={"call": b_seen[-1].data["id"], "approve": True},
            )
            b_rest = list(b_events)
        stopped = editor_on_two.post(f"/api/conversations/{a_conversation}/stop")
        a_stopped.set()
        a_rest = list(a_events)

    assert busy.status_code == 409 and "still running" in busy.json()["detail"]
    assert approved.json() == {"delivered": True}
    assert stopped.json() == {"stopping": True}

    assert [e.type for e in a_seen] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT"]
    assert [e.type for e in a_rest[-2:]] == ["ERROR", "DONE"]
    assert a_rest[-2].data["code"] == "stopped"
    streamed = chat_text(a_seen + a_rest)
    assert 0 < len(streamed) < len("w " * 200)
    a_history = stored_history(a_conversation)
    assert_history_valid(a_history)
    assert [m.role for m in a_history] == ["user", "assistant", "tool", "assistant"]
    assert a_history[-1].content == streamed

    assert [e.type for e in b_seen + b_rest] == [
        "START",
        "TOOL_CALL",
        "APPROVAL_REQUIRED",
        "TOOL_RESULT",
        "CHAT",
        "DONE",
    ]
    assert b_rest[0].data["ok"] is True
    b_history = stored_history(b_conversation)
    assert_history_valid(b_history)
    assert [m.role for m in b_history] == ["user", "assistant", "tool", "assistant"]
    assert b_history[-1].content == B_REPLY

    statuses = {t.conversation_id: t.status for t in TurnRecord.objects.all()}
    assert statuses == {a_conversation: "stopped", b_conversation: "done"}
    assert not Conversation.objects.filter(turn_id__isnull=False).exists()
    assert files_in(root) == {"a.txt": a_text, "b.txt": b_text}
    changes = {c.conversation_id: c for c in FileChange.objects.all()}
    assert {conv: c.paths for conv, c in changes.items()} == {
        a_conversation: ["a.txt"],
        b_conversation: ["b.txt"],
    }

    # Recorded by process two, undone by process one: the undo copy is on the shared storage.
    undone = editor_on_one.post(f"/api/changes/{changes[b_conversation].pk}/undo")
    assert undone.status_code == 200, undone.text
    assert files_in(root) == {"a.txt": a_text, "b.txt": "b before\n"}


def test_reattaching_through_the_other_process_streams_the_rest(
    other_process, client_for, users, project, fake_provider
):
    """A reload that lands on a process without the turn still gets the reply, relayed (held
    until the re-attach was answered, so that the turn still runs then)."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(held_text(40, reattached := threading.Event(), delay=0.03))
    on_one = client_for(users["editor"])
    on_two = client_for(users["editor"], base_url=other_process.base_url)

    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Talk") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=3)
    conversation = seen[0].data["conversation"]

    with on_two.http.stream(
        "GET",
        f"/api/conversations/{conversation}/stream",
        headers={"Last-Event-ID": str(seen[-1].id)},
    ) as response:
        reattached.set()
        rest = list(parse_sse(response.iter_lines()))

    assert [e.id for e in seen + rest] == list(range(1, len(seen) + len(rest) + 1))
    assert rest[-1].type == "DONE"
    assert chat_text(seen + rest) == "w " * 40


def test_a_finished_turn_reattached_through_the_other_process_gets_all_of_it(
    other_process, client_for, users, project, fake_provider
):
    """A re-attach after the turn ended, landing on the process that did not run it (whose
    log is elsewhere), gets the whole turn from the stored messages: from START to DONE,
    the call and its result, the same text."""
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([write("a.txt", "a\n")], arguments="whole")),
        stream(*text_chunks("w " * 40, pieces=40)),
    )
    on_one = client_for(users["editor"])
    on_two = client_for(users["editor"], base_url=other_process.base_url)
    live = on_one.chat(project.pk, rojo=rojo.slug, message="Write a")
    conversation = live[0].data["conversation"]

    with on_two.http.stream("GET", f"/api/conversations/{conversation}/stream") as response:
        assert response.status_code == 200
        stored = list(parse_sse(response.iter_lines()))

    kinds = [e.type for e in stored]
    assert kinds[0] == "START" and kinds[-1] == "DONE"
    assert kinds.index("TOOL_CALL") < kinds.index("TOOL_RESULT") < kinds.index("CHAT")
    assert chat_text(stored) == chat_text(live) == "w " * 40
    assert not any(e.type == "ERROR" for e in stored)


def test_badges_and_a_delete_reach_across_processes(
    other_process, client_for, users, project, fake_provider
):
    """A turn waiting for approval on one process is `waiting` in the other's list; deleting
    it through the other process stops the turn first (the waiting call never runs)."""
    root = project_root_create(project.pk)
    (root / "b.txt").write_text("b before\n")
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*tool_call_chunks([write("b.txt", "b after\n")])))
    on_one = client_for(users["editor"])
    on_two = client_for(users["owner"], base_url=other_process.base_url)
    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Rewrite b") as response:
        events = parse_sse(response.iter_lines())
        conversation = read_until(events, "APPROVAL_REQUIRED")[0].data["conversation"]

        def badge() -> str:
            url = f"/api/projects/{project.pk}/conversations/status"
            return on_two.get(url, params={"ids": conversation}).json()["statuses"][
                str(conversation)
            ]

        wait_until(lambda: badge() == "waiting")
        deleted = on_two.http.delete(f"/api/conversations/{conversation}")
        assert deleted.status_code == 200, deleted.text
        assert [e.type for e in events][-2:] == ["ERROR", "DONE"]
    assert not Conversation.objects.filter(pk=conversation).exists()
    assert (root / "b.txt").read_text() == "b before\n"  # it was never approved
