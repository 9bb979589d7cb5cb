"""Re-attaching through a process that does not run the turn: events relayed over the layer."""

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.utils import timezone

from roject.access import aproject_access
from rojos import turn_relay, turns
from rojos.models import Conversation
from tests.fake_provider import stream, text_chunks
from tests.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def own_channel_layer():
    """A channel layer object of these tests' own, as each server process has its own.

    Redis' layer lets one event loop at a time receive on a layer object, and the live
    server's loop in this process may still be receiving for a turn an earlier test left.
    """
    saved = channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)
    yield
    channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)
    if saved is not None:
        channel_layers.backends[DEFAULT_CHANNEL_LAYER] = saved


async def start_turn(project, user, fake_provider, message: str):
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    access = await aproject_access(user=user, project_id=project.pk)
    turn = await turns.turn_start(
        access=access, user=user, rojo=rojo, conversation=None, message=message
    )
    return await Conversation.objects.aget(pk=turn.conversation_id), turn


async def test_a_follower_elsewhere_gets_what_it_missed_then_the_rest(
    project, users, fake_provider
):
    """The turn's process relays every event after Last-Event-ID, in order, through to DONE."""
    fake_provider.add(stream(*text_chunks("w " * 30, pieces=30), delay=0.02))
    conversation, turn = await start_turn(project, users["editor"], fake_provider, "Talk")
    seen = []
    async for event in turn.follow():
        seen.append(event)
        if len(seen) == 4:
            break

    after = seen[-1].seq  # 4, or more when the follower fell behind and got chunks joined
    relayed = [e async for e in turn_relay.turn_follow_remote(conversation.pk, after=after)]

    seqs = [e.seq for e in seen + relayed]
    assert seqs == sorted(set(seqs)) and relayed[0].seq == after + 1
    assert relayed[-1].type == "DONE"
    text = "".join(e.data["text"] for e in seen + relayed if e.type == "CHAT")
    assert text == "w " * 30
    await turn.task


async def test_a_quiet_turn_keeps_its_remote_follower_with_pings(
    project, users, fake_provider, monkeypatch
):
    """A turn with nothing to say for a while (an approval) pings, so the follower waits."""
    monkeypatch.setattr(turn_relay, "FOLLOW_PING_SECONDS", 0.05)
    monkeypatch.setattr(turn_relay, "FOLLOW_SILENCE_SECONDS", 0.2)
    fake_provider.add(stream(*text_chunks("late", pieces=1), first_byte_delay=0.6))
    conversation, turn = await start_turn(project, users["editor"], fake_provider, "Wait")

    relayed = [e async for e in turn_relay.turn_follow_remote(conversation.pk, after=0)]

    assert [e.type for e in relayed] == ["START", "CHAT", "DONE"]
    await turn.task


async def test_a_follower_of_a_gone_process_ends_after_the_silence(project, monkeypatch):
    """Nobody relays for a turn whose process died: the stream ends so the client reloads."""
    monkeypatch.setattr(turn_relay, "FOLLOW_SILENCE_SECONDS", 0.2)
    conversation = await Conversation.objects.acreate(
        project=project, turn_id=uuid.uuid4(), turn_heartbeat=timezone.now()
    )

    started = asyncio.get_running_loop().time()
    relayed = [e async for e in turn_relay.turn_follow_remote(conversation.pk, after=0)]

    assert [(e.seq, e.type) for e in relayed] == [(0, "DONE")]
    assert asyncio.get_running_loop().time() - started < 2


class FlakyLayer:
    """A channel layer whose first receive fails as a Redis read timing out."""

    def __init__(self, then: dict) -> None:
        self.then = then
        self.receives = 0

    async def receive(self, channel: str) -> dict:
        self.receives += 1
        if self.receives == 1:
            raise TimeoutError("Timeout reading from 127.0.0.1:6379")
        return self.then


async def test_a_failing_layer_does_not_stop_the_turn_from_listening(monkeypatch):
    """A Stop sent after the layer failed once still reaches the turn."""
    monkeypatch.setattr(turn_relay, "LAYER_RETRY_SECONDS", 0)
    running = asyncio.ensure_future(asyncio.sleep(30))
    layer = FlakyLayer(then={"type": "turn.stop"})

    await asyncio.wait_for(turn_relay.turn_listen(layer, "c", turns.Turn(1), running), 5)

    assert layer.receives == 2
    with pytest.raises(asyncio.CancelledError):
        await running
