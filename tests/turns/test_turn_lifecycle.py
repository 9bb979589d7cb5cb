"""A turn's life at its edges: a heartbeat that fails once, a Stop while the reply is being
stored, a relay gone as it ends, a re-attach with an id from another turn. Each leaves one
turn per conversation and a valid history."""

import logging
import threading
import time

import pytest
from channels.layers import InMemoryChannelLayer
from django.db import connection
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from roject.models import Membership, Role
from roject.storage import project_root_create
from rojos.agent.access_ended import REMOVED_MESSAGE, REVOKED
from rojos.models import Conversation, TurnRecord, UsageRecord
from rojos.turns import start as turn_start
from tests.support.fake_provider import Gate, chunk, stream, text_chunks, tool_call_chunks
from tests.support.held_store import message_store_held
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse, read_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick(settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_TURN_HEARTBEAT_SECONDS = 0.2
    settings.ROJO_TURN_STALE_SECONDS = 3


@pytest.fixture
def rojo(fake_provider):
    return make_rojo(fake_provider.base_url)


def reattach(client, conversation: int, last_id: int):
    response = client.get(
        f"/api/conversations/{conversation}/stream", headers={"Last-Event-ID": str(last_id)}
    )
    return list(parse_sse(response.text.splitlines()))


def send(client, project, rojo, message: str, conversation: int):
    return client.post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": message, "conversation": conversation},
    )


def test_a_reattach_with_an_id_this_turn_never_gave_gets_the_turn_from_its_start(
    client_for, users, project, rojo, fake_provider
):
    """A tab kept the last id of a long turn; the next turn is shorter. Before, the stream
    ended with nothing, not even DONE, and the page asked again at once, for two minutes."""
    client = client_for(users["editor"])
    fake_provider.add(stream(*text_chunks("word " * 20, pieces=20)), stream(*text_chunks("Hi.")))
    first = client.chat(project.pk, rojo=rojo.slug, message="Long one")
    conversation, last_id = first[0].data["conversation"], first[-1].id
    assert last_id == 22  # START, 20 CHAT, DONE
    client.chat(project.pk, rojo=rojo.slug, message="Short", conversation=conversation)

    events = reattach(client, conversation, last_id)

    assert [e.type for e in events] == ["START", "CHAT", "DONE"]
    assert events[1].data == {"text": "Hi."}


_REFUSE_BEAT = {
    "sqlite": [
        "CREATE TRIGGER rojo_test_refuse_beat BEFORE UPDATE OF turn_heartbeat ON "
        "rojos_conversation BEGIN SELECT RAISE(ABORT, 'the disk is gone'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION rojo_test_refuse_beat() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the disk is gone'; END $$",
        "CREATE TRIGGER rojo_test_refuse_beat BEFORE UPDATE OF turn_heartbeat ON "
        "rojos_conversation FOR EACH ROW EXECUTE FUNCTION rojo_test_refuse_beat()",
    ],
}
_ALLOW_BEAT = {
    "sqlite": ["DROP TRIGGER IF EXISTS rojo_test_refuse_beat"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS rojo_test_refuse_beat ON rojos_conversation",
        "DROP FUNCTION IF EXISTS rojo_test_refuse_beat()",
    ],
}


def _run(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def test_a_heartbeat_that_fails_once_keeps_the_claim(
    client_for, users, project, fake_provider, settings
):
    """A beat failed once (the database refused the write) while a call waited for
    approval. Before, the heartbeat stopped for good, and a message from another tab took
    the conversation over and ran beside the live turn. The database refuses the beat's
    write (a trigger) until the server logged the failure, then takes the next ones."""
    settings.ROJO_APPROVAL_TIMEOUT = 30
    rojo = make_rojo(fake_provider.base_url)
    (project_root_create(project.pk) / "notes.txt").write_text("mine\n")
    overwrite = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    fake_provider.add(stream(*tool_call_chunks([overwrite])))
    client = client_for(users["editor"])
    failed = threading.Event()

    class BeatFailed(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("heartbeat of conversation"):
                failed.set()

    handler = BeatFailed()
    logging.getLogger("rojos.turns.claims").addHandler(handler)
    vendor = connection.vendor
    try:
        with client.chat_stream(project.pk, rojo=rojo.slug, message="Overwrite") as response:
            events = parse_sse(response.iter_lines())
            conversation = next(events).data["conversation"]
            read_until(events, "APPROVAL_REQUIRED")
            _run(_REFUSE_BEAT[vendor])
            try:
                assert failed.wait(10), "no beat failed"
            finally:
                _run(_ALLOW_BEAT[vendor])
            refused_until = timezone.now()
            wait_until(
                lambda: Conversation.objects.get(pk=conversation).turn_heartbeat > refused_until
            )
            time.sleep(settings.ROJO_TURN_STALE_SECONDS + 1)  # a claim left alone is stale now

            other_tab = send(client_for(users["editor"]), project, rojo, "Other tab", conversation)
            stop = client.post(f"/api/conversations/{conversation}/stop").json()
            rest = [e.type for e in events]
    finally:
        logging.getLogger("rojos.turns.claims").removeHandler(handler)
        _run(_ALLOW_BEAT[vendor])

    assert other_tab.status_code == 409
    assert stop == {"stopping": True}
    assert rest[-2:] == ["ERROR", "DONE"]
    assert_history_valid(stored_history(conversation))


def test_stop_while_the_reply_asking_for_calls_is_stored_answers_every_call(
    client_for, users, project, rojo, fake_provider, crossings
):
    """The reply with its calls was being stored (the database slow) when Stop came: the
    calls it asked for are answered as interrupted, and the page is told. The reply waits
    at a gate until the tables are locked, and the Stop goes once its store was sent to a
    database thread."""
    locked = threading.Event()
    fake_provider.add(stream(Gate(locked), *tool_call_chunks([("list_files", {"path": ""})])))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="List") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        with message_store_held(conversation, crossings, locked):
            assert client.post(f"/api/conversations/{conversation}/stop").json() == {
                "stopping": True
            }
            time.sleep(0.3)
        rest = [(e.type, e.data) for e in events]

    history = stored_history(conversation)
    assert_history_valid(history)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert [kind for kind, _ in rest] == ["TOOL_CALL", "TOOL_RESULT", "ERROR", "DONE"]
    assert rest[1][1]["result"] == {"error": "interrupted"}


def test_a_relay_gone_as_the_turn_ends_still_frees_the_conversation(
    client_for, users, project, rojo, fake_provider, monkeypatch
):
    class ResettingLayer(InMemoryChannelLayer):
        """Redis restarting as the turn ends: leaving the group fails."""

        async def group_discard(self, group, channel):
            raise RedisConnectionError("Connection reset by peer")

    monkeypatch.setattr(turn_start, "control_layer", lambda: ResettingLayer())
    fake_provider.add(stream(*text_chunks("First.")), stream(*text_chunks("Second.")))
    client = client_for(users["editor"])
    first = client.chat(project.pk, rojo=rojo.slug, message="One")
    assert [e.type for e in first] == ["START", "CHAT", "DONE"]
    conversation = first[0].data["conversation"]
    monkeypatch.undo()

    second = send(client, project, rojo, "Two", conversation)

    assert second.status_code == 200
    statuses = TurnRecord.objects.filter(conversation=conversation).values_list("status", flat=True)
    assert list(statuses) == ["done", "done"]


def test_a_reply_that_runs_past_the_turn_limit_is_stopped_with_a_clear_error(
    client_for, users, project, rojo, fake_provider, settings
):
    """A provider that streams (or keeps the connection alive) for ever cannot hold the
    conversation and its cost without end."""
    settings.ROJO_TURN_MAX_SECONDS = 0.6
    fake_provider.add(stream(*text_chunks("word " * 40, pieces=40), delay=0.1))  # 4 s
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="Go on for ever")

    assert [e.type for e in events][-2:] == ["ERROR", "DONE"]
    assert events[-2].data == {
        "message": "The reply ran past its limit of 0.01 minutes (ROJO_TURN_MAX_SECONDS) and "
        "was stopped; reply to let it go on.",
        "code": "timeout",
    }
    conversation = events[0].data["conversation"]
    history = stored_history(conversation)
    assert_history_valid(history)
    # What was shown is what was kept: the text so far, or (a machine so loaded that the
    # limit passed before the provider was asked) no reply at all.
    replies = [m for m in history if m.role == "assistant"]
    streamed = "".join(e.data["text"] for e in events if e.type == "CHAT")
    assert ((replies[-1].content or "") if replies else "") == streamed
    if not streamed:
        fake_provider.allow_leftovers()
    assert TurnRecord.objects.get().error_code == "timeout"


@pytest.mark.parametrize("change", ["removed", "made-viewer"])
def test_a_member_removed_or_made_a_viewer_mid_turn_changes_no_more_files(
    client_for, users, project, rojo, fake_provider, change
):
    """A viewer's turn goes on with read tools only; a removed member's stops (#15). The call
    comes only once the membership changed (a Gate, not a head start the test must win)."""
    root = project_root_create(project.pk)
    write = ("write_text_content", {"path": "after.txt", "text": "written anyway"})
    changed = threading.Event()
    fake_provider.add(stream(Gate(changed), *tool_call_chunks([write], arguments="whole")))
    if change == "made-viewer":
        fake_provider.add(stream(*text_chunks("I could not.")))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Write") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        wait_until(lambda: fake_provider.requests)  # the step's role check is behind it
        membership = Membership.objects.filter(project=project, user=users["editor"])
        if change == "removed":
            membership.delete()
        else:
            membership.update(role=Role.VIEWER)
        changed.set()
        rest = [(e.type, e.data) for e in events]

    assert not (root / "after.txt").exists()
    result = next(data for kind, data in rest if kind == "TOOL_RESULT")
    assert result["result"] == REVOKED and result["ok"] is False
    assert_history_valid(stored_history(conversation))
    if change == "removed":
        assert rest[-2] == ("ERROR", {"message": REMOVED_MESSAGE, "code": "revoked"})
        assert len(fake_provider.requests) == 1
    else:
        assert rest[-2:] == [("CHAT", {"text": "I could not."}), ("DONE", {})]
        offered = {tool["function"]["name"] for tool in fake_provider.requests[1]["tools"]}
        assert offered == {"read_path_meta", "get_text_content", "list_files", "search_text"}


@pytest.mark.parametrize("thinks_only", [False, True], ids=["text", "thinking"])
def test_a_reply_cut_by_the_models_output_limit_says_so(
    client_for, users, project, rojo, fake_provider, thinks_only
):
    """finish_reason "length" on a reply without calls: the text (or the thinking) is kept
    and shown, and the turn ends with an ERROR that says the reply was cut, not as if the
    reply were whole; the next message carries on from it."""
    if thinks_only:
        cut = stream(chunk({"role": "assistant", "reasoning_content": "Let me think. " * 20}),
                     chunk({}, "length"))  # fmt: skip
    else:
        cut = stream(*text_chunks("The plan has three parts: first", finish="length"))
    fake_provider.add(cut, stream(*text_chunks("the rest.")))
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="Write the plan")

    assert [e.type for e in events][-2:] == ["ERROR", "DONE"]
    assert events[-2].data["code"] == "output_limit"
    assert ("thinking" in events[-2].data["message"]) is thinks_only
    conversation = events[0].data["conversation"]
    history = stored_history(conversation)
    assert_history_valid(history)
    record = TurnRecord.objects.get(conversation=conversation)
    assert record.error_code == "output_limit"
    usage = UsageRecord.objects.get(conversation=conversation)  # the provider's, reported
    assert usage.reported and usage.completion_tokens > 0 and usage.message_id == history[-1].pk
    if not thinks_only:
        assert history[-1].content == "The plan has three parts: first"

    again = client.chat(project.pk, rojo=rojo.slug, message="Go on", conversation=conversation)
    assert [e.type for e in again][-1] == "DONE" and "ERROR" not in [e.type for e in again]
    assert_history_valid(stored_history(conversation))
