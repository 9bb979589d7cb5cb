"""Starting a turn: one database trip of a few statements, and a start that fails ends cleanly."""

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers
from django.db import connection
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from roject.access import aproject_access
from rojos import turns
from rojos.models import Conversation, Message, TurnRecord
from tests.fake_provider import stream, text_chunks
from tests.helpers import make_rojo

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


async def _start(project, user, rojo, conversation, message, access=None):
    access = access or await aproject_access(user=user, project_id=project.pk)
    return await turns.turn_start(
        access=access, user=user, rojo=rojo, conversation=conversation, message=message
    )


async def test_a_turn_starts_with_three_inserts_then_four_statements_after(
    project, users, fake_provider, statements
):
    seen, install, remove = statements
    fake_provider.add(stream(*text_chunks("One.", pieces=1)))
    fake_provider.add(stream(*text_chunks("Two.", pieces=1)))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    user = users["editor"]
    access = await aproject_access(user=user, project_id=project.pk)
    await install()
    try:
        first = await _start(project, user, rojo, None, "Hi", access)
        created = list(seen)
        await first.task
        conversation = await Conversation.objects.aget(pk=first.conversation_id)
        seen.clear()
        second = await _start(project, user, rojo, conversation, "Again", access)
        continued = list(seen)
        await second.task
    finally:
        await remove()

    # The conversation made already claimed, the message, the turn's record.
    assert created == ["INSERT", "INSERT", "INSERT"]
    # The claim, the history, the message, the record: no repairs after a clean end.
    assert continued == ["UPDATE", "SELECT", "INSERT", "INSERT"]
    roles = [m.role async for m in Message.objects.filter(conversation=conversation)]
    assert roles == ["user", "assistant", "user", "assistant"]


class BrokenLayer(InMemoryChannelLayer):
    """A channel layer that cannot be reached (Redis down)."""

    async def group_add(self, group, channel):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def group_send(self, group, message):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


async def test_a_turn_that_cannot_start_ends_as_failed_and_frees_the_conversation(
    project, users, fake_provider, monkeypatch
):
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, BrokenLayer())

    with pytest.raises(RedisConnectionError):
        await _start(project, users["editor"], rojo, None, "Hi")

    conversation = await Conversation.objects.aget()
    assert conversation.turn_id is None and not conversation.running
    record = await TurnRecord.objects.aget()
    assert (record.status, record.error_code) == (TurnRecord.Status.ERROR, "internal")
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
    assert response.json() == {
        "detail": "The server cannot reach its message relay; try again in a moment."
    }
    conversation = Conversation.objects.get()
    assert not conversation.running
    assert [m.content for m in Message.objects.filter(conversation=conversation)] == ["Hi"]
    assert TurnRecord.objects.get().status == TurnRecord.Status.ERROR

    conversation.turn_id, conversation.turn_heartbeat = uuid.uuid4(), timezone.now()
    conversation.save()  # as if a turn ran in another process
    stop = client.post(f"/api/conversations/{conversation.pk}/stop")
    assert stop.status_code == 503
