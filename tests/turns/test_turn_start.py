"""Starting a turn: one database trip of a few statements, and a start that fails ends cleanly."""

import asyncio
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers
from django.db import OperationalError, connection
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from roject.members.access import aproject_access
from rojos.context.budgets import budget_check
from rojos.errors import TurnNotStarted
from rojos.models import Conversation, Message, TurnRecord
from rojos.turns import runner as turns
from rojos.turns import start as starting
from rojos.web.selectors import rojo_get
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import BrokenLayer, command_error, make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

TRANSACTION_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT", "ROLLBACK")


@pytest.fixture
def statements():
    """The SQL statements run on this context's database thread (where a turn starts)."""
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith(TRANSACTION_CONTROL):
            seen.append(sql.split(None, 1)[0].upper())
        return execute(sql, params, many, context)

    def install() -> None:
        connection.execute_wrappers.append(record)

    def remove() -> None:
        connection.execute_wrappers.remove(record)

    return seen, sync_to_async(install), sync_to_async(remove)


async def _start(project, user, rojo, conversation, message, access=None, budgets=None):
    access = access or await aproject_access(user=user, project_id=project.pk)
    # Read before the start, as the chat endpoint reads them (rojos.web.selectors).
    if budgets is None:
        budgets = await sync_to_async(budget_check)(user=user, project_id=project.pk)
    return await starting.turn_start(
        access=access,
        user=user,
        rojo=rojo,
        conversation=conversation,
        message=message,
        budgets=budgets,
    )


async def test_a_turn_starts_with_its_limits_counted_then_three_inserts(
    project, users, fake_provider, statements
):
    seen, install, remove = statements
    fake_provider.add(stream(*text_chunks("One.", pieces=1)))
    fake_provider.add(stream(*text_chunks("Two.", pieces=1)))
    made = await sync_to_async(make_rojo)(fake_provider.base_url)
    rojo = await sync_to_async(rojo_get)(made.pk)  # as the chat endpoint loads it
    user = users["editor"]
    access = await aproject_access(user=user, project_id=project.pk)
    budgets = await sync_to_async(budget_check)(user=user, project_id=project.pk)
    await install()
    try:
        first = await _start(project, user, rojo, None, "Hi", access, budgets)
        created = list(seen)
        await first.task
        conversation = await Conversation.objects.aget(pk=first.conversation_id)
        seen.clear()
        second = await _start(project, user, rojo, conversation, "Again", access, budgets)
        continued = list(seen)
        await second.task
    finally:
        await remove()

    # The per-user limits counted in the start's transaction, after the user's lock (a row
    # lock on PostgreSQL; SQLite's IMMEDIATE transaction holds the write lock already): one
    # count a limit, each through an index.
    lock = ["SELECT"] if connection.features.has_select_for_update else []
    limits = [*lock, "SELECT", "SELECT"]
    # Then the conversation made already claimed, the message, the turn's record.
    assert created == [*limits, "INSERT", "INSERT", "INSERT"]
    # The claim, the history, the message, the record: no repairs after a clean end.
    assert continued == [*limits, "UPDATE", "SELECT", "INSERT", "INSERT"]
    roles = [m.role async for m in Message.objects.filter(conversation=conversation)]
    assert roles == ["user", "assistant", "user", "assistant"]


async def test_a_turn_that_cannot_start_ends_as_failed_and_frees_the_conversation(
    project, users, fake_provider, monkeypatch
):
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, BrokenLayer())

    with pytest.raises(TurnNotStarted) as raised:
        await _start(project, users["editor"], rojo, None, "Hi")

    assert isinstance(raised.value.__cause__, RedisConnectionError)
    conversation = await Conversation.objects.aget()
    assert raised.value.conversation_id == conversation.pk
    assert conversation.turn_id is None and not conversation.running
    record = await TurnRecord.objects.aget()
    assert (record.status, record.error_code) == (TurnRecord.Status.ERROR, "unavailable")
    assert record.error == "The server cannot reach its message relay; try again in a moment."
    assert record.finished is not None

    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer())
    fake_provider.add(stream(*text_chunks("Back.", pieces=1)))
    turn = await _start(project, users["editor"], rojo, conversation, "Again")
    await turn.task
    assert [m.content async for m in Message.objects.filter(conversation=conversation)] == [
        "Hi",
        "Again",
        "Back.",
    ]


def test_a_relay_that_is_down_answers_503_and_loses_nothing(
    client_for, users, project, fake_provider, monkeypatch
):
    """Chat and Stop answer with a sentence; the message stays, its turn recorded as failed."""
    rojo = make_rojo(fake_provider.base_url)
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, BrokenLayer())
    client = client_for(users["editor"])

    response = client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "Hi"}
    )

    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    conversation = Conversation.objects.get()
    assert response.json() == {
        "detail": "The server cannot reach its message relay; try again in a moment.",
        "conversation": conversation.pk,
    }
    assert not conversation.running
    assert [m.content for m in Message.objects.filter(conversation=conversation)] == ["Hi"]
    assert TurnRecord.objects.get().status == TurnRecord.Status.ERROR

    conversation.turn_id, conversation.turn_heartbeat = uuid.uuid4(), timezone.now()
    conversation.save()  # as if a turn ran in another process
    stop = client.post(f"/api/conversations/{conversation.pk}/stop")
    assert stop.status_code == 503


class FailingLayer(InMemoryChannelLayer):
    """A channel layer whose every group_add raises the exception it was given."""

    def __init__(self, error: Exception):
        super().__init__()
        self.error = error

    async def group_add(self, group, channel):
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "detail"),
    [
        (
            RedisConnectionError("Connection refused."),
            503,
            "The server cannot reach its message relay; try again in a moment.",
        ),
        (
            OperationalError("database is locked"),
            503,
            "The database is busy or unreachable; try again in a moment.",
        ),
        (
            RuntimeError("a bug"),
            500,
            "The reply could not start on the server; see its log.",
        ),
    ],
    ids=["relay", "database", "bug"],
)
def test_a_reply_that_cannot_start_names_the_conversation_its_message_is_in(
    client_for, users, project, fake_provider, monkeypatch, error, status, detail
):
    """The client can then show the message where it is and send the next one there."""
    rojo = make_rojo(fake_provider.base_url)
    client = client_for(users["editor"])
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, FailingLayer(error))

    response = client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "Hi"}
    )

    conversation = Conversation.objects.get()
    assert response.status_code == status
    assert response.json() == {"detail": detail, "conversation": conversation.pk}

    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer())
    fake_provider.add(stream(*text_chunks("Back.", pieces=1)))
    events = client.chat(project.pk, rojo=rojo.pk, message="Again", conversation=conversation.pk)
    assert [e.data["text"] for e in events if e.type == "CHAT"] == ["Back."]
    assert [m.content for m in Message.objects.filter(conversation=conversation)] == [
        "Hi",
        "Again",
        "Back.",
    ]


def test_the_chat_command_says_where_the_message_is_kept(project, fake_provider, monkeypatch):
    make_rojo(fake_provider.base_url)
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, BrokenLayer())

    message = command_error("chat", "Hi", project="demo-project", rojo="test-rojo", user="editor")

    conversation = Conversation.objects.get()
    assert message == (
        "the reply could not start (Error 111 connecting to 127.0.0.1:6379. Connection "
        f"refused.); the message is kept in conversation {conversation.pk}"
    )


async def test_a_request_cancelled_while_its_turn_is_being_claimed_still_starts_the_turn(
    project, users, fake_provider, monkeypatch
):
    """The client hung up while the claim and the message were being stored (the database
    was busy). Before, they were stored with nothing running, and the conversation read as
    running until its claim went stale; a turn outlives its request, so now it starts."""
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Answered.", pieces=1)))
    entered, release = threading.Event(), threading.Event()
    real_begin = starting.turn_begin_blocking

    def slow_begin(**kwargs):
        entered.set()
        release.wait(5)
        return real_begin(**kwargs)

    monkeypatch.setattr(starting, "turn_begin_blocking", slow_begin)
    request = asyncio.ensure_future(_start(project, users["editor"], rojo, None, "Hi"))
    await asyncio.to_thread(entered.wait, 5)

    request.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await request

    conversation = await Conversation.objects.aget()
    turn = turns.turn_get(conversation.pk)
    await turn.task
    assert [m.content async for m in Message.objects.filter(conversation=conversation)] == [
        "Hi",
        "Answered.",
    ]
    assert (await TurnRecord.objects.aget()).status == TurnRecord.Status.DONE


async def test_a_stop_before_the_turns_task_first_ran_ends_it_stopped_and_frees_all(
    project, users, fake_provider, monkeypatch, settings
):
    """A Stop that lands after the turn is registered but before its task first ran (a task
    cancelled then would never run, not even its cleanup): the turn stops as it begins,
    asks the provider nothing, ends `stopped` with DONE, frees the conversation and gives
    its start's place back."""
    from rojos.turns.admission import start_admit

    settings.ROJO_START_CONCURRENCY = 1
    settings.ROJO_START_HOLD_SECONDS = 60
    registered = starting.turn_register

    def register_then_stop(turn):
        registered(turn)
        # A Stop handled next, before the task created after this takes its first step:
        # what turn_control.turn_stop does for a turn of this process.
        asyncio.get_running_loop().call_soon(turn.stop)

    monkeypatch.setattr(starting, "turn_register", register_then_stop)
    made = await sync_to_async(make_rojo)(fake_provider.base_url)
    rojo = await sync_to_async(rojo_get)(made.pk)
    user = users["editor"]
    access = await aproject_access(user=user, project_id=project.pk)
    admission = await start_admit()

    turn = await starting.turn_start(
        access=access, user=user, rojo=rojo, conversation=None, message="Hi", admission=admission
    )
    await asyncio.wait_for(asyncio.shield(turn.task), 10)

    assert turn.task is not None and turn.finished and turn.status == TurnRecord.Status.STOPPED
    assert turn.events.at(turn.seq).type == "DONE"
    assert fake_provider.requests == []
    record = await TurnRecord.objects.aget(pk=turn.record_id)
    assert record.status == TurnRecord.Status.STOPPED
    conversation = await Conversation.objects.aget(pk=turn.conversation_id)
    assert conversation.turn_id is None
    (await asyncio.wait_for(start_admit(), 1)).release()  # its place was given back
