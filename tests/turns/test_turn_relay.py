"""Re-attaching through a process that does not run the turn: events relayed over the layer."""

import asyncio
import contextlib
import os
import subprocess
import threading
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers
from django.utils import timezone

from roject.members.access import aproject_access
from rojos.models import Conversation, Message, TurnRecord
from rojos.models.claims import process_owner
from rojos.turns import relay as turn_relay
from rojos.turns import runner as turns
from rojos.turns.claims import turn_beats_blocking, turn_claim_blocking
from rojos.turns.ended_events import stored_turn_events
from rojos.turns.repair import INTERRUPTED_MESSAGE
from rojos.turns.start import turn_start
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


async def start_turn(project, user, fake_provider, message: str):
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    access = await aproject_access(user=user, project_id=project.pk)
    turn = await turn_start(access=access, user=user, rojo=rojo, conversation=None, message=message)
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


async def test_a_turn_whose_claim_was_taken_over_stops_at_its_next_beat(
    project, users, fake_provider, settings
):
    """Two turns run on the process; the claim of one is taken over (its beats judged dead
    elsewhere): the next beat stops that one, and the other streams on to its end. Both
    replies are asked for, and held at a gate halfway, before the claim is taken; the gate
    opens once the beat has stopped the one."""
    settings.ROJO_TURN_HEARTBEAT_SECONDS = 0.1
    halfway = threading.Event()
    chunks = text_chunks("w " * 40, pieces=40)
    fake_provider.add(stream(*chunks[:20], Gate(halfway), *chunks[20:]))
    fake_provider.add(stream(*chunks[:20], Gate(halfway), *chunks[20:]))
    user = users["editor"]
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    access = await aproject_access(user=user, project_id=project.pk)
    taken, kept = [
        await turn_start(access=access, user=user, rojo=rojo, conversation=None, message=text)
        for text in ("A", "B")
    ]
    await asyncio.to_thread(wait_until, lambda: len(fake_provider.requests) == 2, timeout=60)
    await Conversation.objects.filter(pk=taken.conversation_id).aupdate(turn_id=uuid.uuid4())
    try:
        with contextlib.suppress(asyncio.CancelledError):  # the task the beat cancelled
            await asyncio.wait_for(taken.task, 60)
    finally:
        halfway.set()

    taken_events = [e async for e in taken.follow()]
    kept_events = [e async for e in kept.follow()]

    assert taken.claim_lost
    assert [e.type for e in taken_events[-2:]] == ["ERROR", "DONE"]
    assert "could not confirm it was still running" in taken_events[-2].data["message"]
    assert not kept.claim_lost
    assert kept_events[-1].type == "DONE"
    assert "".join(e.data["text"] for e in kept_events if e.type == "CHAT") == "w " * 40
    await taken.task
    await kept.task


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


def gone_owner() -> str:
    """A claim owner naming a process of this host that has exited."""
    child = subprocess.Popen(["true"])
    child.wait()
    return process_owner().replace(f":{os.getpid()}:", f":{child.pid}:")


async def test_a_follower_of_a_gone_process_is_told_it_stopped_within_seconds(
    project, users, settings, monkeypatch
):
    """A fresh claim whose owner process has exited: the follower gets ERROR `interrupted`
    and DONE within a few seconds, the turn is recorded interrupted, the claim given up."""
    settings.ROJO_TURN_STALE_SECONDS = 60  # the gone owner alone must tell
    conversation = await Conversation.objects.acreate(
        project=project,
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now(),
        turn_owner=gone_owner(),
    )
    asked = await Message.objects.acreate(
        conversation=conversation, position=0, role="user", content="Hi"
    )
    await TurnRecord.objects.acreate(conversation=conversation, user_message=asked)

    checks = []
    turn_ended = turn_relay._turn_ended

    async def counted(*args):
        checks.append(args)
        return await turn_ended(*args)

    monkeypatch.setattr(turn_relay, "_turn_ended", counted)
    relayed = [e async for e in turn_relay.turn_follow_remote(conversation.pk, after=3)]

    assert [(e.seq, e.type, e.data.get("code")) for e in relayed] == [
        (4, "ERROR", "interrupted"),
        (5, "DONE", None),
    ]
    assert relayed[0].data["message"] == INTERRUPTED_MESSAGE
    # Told at the first check of the claim (FOLLOW_CHECK_SECONDS without word), not by the
    # claim going stale a minute later.
    assert len(checks) == 1
    await conversation.arefresh_from_db()
    assert (conversation.turn_id, conversation.turn_owner) == (None, "")
    record = await TurnRecord.objects.aget(user_message=asked)
    assert (record.status, record.error_code) == ("interrupted", "interrupted")


async def test_a_follower_of_a_turn_on_another_host_is_told_once_its_claim_is_stale(
    project, settings
):
    """An owner elsewhere cannot be checked: its claim going stale ends the turn."""
    settings.ROJO_TURN_STALE_SECONDS = 1
    conversation = await Conversation.objects.acreate(
        project=project,
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now(),
        turn_owner="elsewhere/pid:[1]:42:cafe",
    )

    relayed = [e async for e in turn_relay.turn_follow_remote(conversation.pk, after=0)]

    assert [(e.seq, e.type) for e in relayed] == [(1, "ERROR"), (2, "DONE")]
    await conversation.arefresh_from_db()
    assert conversation.turn_id is None


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


class ScriptedLayer:
    """A layer whose receives give these messages in turn."""

    def __init__(self, *messages: dict) -> None:
        self.messages = list(messages)

    async def receive(self, channel: str) -> dict:
        return self.messages.pop(0)


async def test_a_message_the_listener_cannot_handle_leaves_it_listening_for_stop(
    monkeypatch, caplog
):
    """A malformed message (a follow request with no channel) is logged; the Stop after it
    still reaches the turn (a listener that ended left its turn deaf to Stop)."""
    monkeypatch.setattr(turn_relay, "LAYER_RETRY_SECONDS", 0)
    running = asyncio.ensure_future(asyncio.sleep(30))
    layer = ScriptedLayer({"type": "turn.follow", "after": 0}, {"type": "turn.stop"})

    await asyncio.wait_for(turn_relay.turn_listen(layer, "c", turns.Turn(1), running), 5)

    assert layer.messages == []
    assert "listening for Stop failed" in caplog.text
    with pytest.raises(asyncio.CancelledError):
        await running


class SmallLayer(InMemoryChannelLayer):
    """An in-memory layer whose channels hold two messages, counting the sends refused."""

    def __init__(self) -> None:
        super().__init__(capacity=2)
        self.refused = 0
        self.full = asyncio.Event()  # a send was refused

    async def send(self, channel: str, message: dict) -> None:
        try:
            await super().send(channel, message)
        except ChannelFull:
            self.refused += 1
            self.full.set()
            raise


async def test_a_slow_remote_follower_gets_its_backlog_late_rather_than_never(
    project, users, fake_provider, monkeypatch
):
    """A follower that stops reading while its channel fills: the relay waits and sends the
    backlog from the turn's kept events once it reads again; every event arrives, in order."""
    layer = SmallLayer()
    # For this test only: left in place, the process's later tests (the live server's turns)
    # would relay through it, unheard by any server process on Redis.
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, layer)
    monkeypatch.setattr(turn_relay, "BATCH_EVENTS", 1)
    # Held after five pieces until the follower has its first event: the turn still streams
    # when it stops reading, however late a loaded machine lets the follow begin (a turn
    # ended first sends its backlog joined, in fewer messages than the channel holds).
    chunks = text_chunks("w " * 50, pieces=50)
    chunks.insert(5, Gate(following := threading.Event()))
    fake_provider.add(stream(*chunks, delay=0.01))
    conversation, turn = await start_turn(project, users["editor"], fake_provider, "Talk")

    relayed = []
    async for event in turn_relay.turn_follow_remote(conversation.pk, after=0):
        relayed.append(event)
        if len(relayed) == 1:  # not reading until the channel is full
            following.set()
            await asyncio.wait_for(layer.full.wait(), timeout=30)

    assert layer.refused > 0
    # In order, none twice: a backlog of CHAT chunks comes joined, numbered as its last chunk.
    seqs = [e.seq for e in relayed]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    assert relayed[-1].type == "DONE" and relayed[-1].seq == turn.seq
    assert "".join(e.data["text"] for e in relayed if e.type == "CHAT") == "w " * 50
    await turn.task


async def test_a_reattach_to_a_turn_finished_elsewhere_gets_its_stored_events(
    project, users, fake_provider
):
    """No live log here (it ran in another process, or was dropped): the stored turn comes
    whole, numbered from 1, through its DONE."""
    fake_provider.add(stream(*text_chunks("All of it.", pieces=4)))
    conversation, turn = await start_turn(project, users["editor"], fake_provider, "Talk")
    await turn.task
    await conversation.arefresh_from_db()

    stored = await stored_turn_events(conversation)

    assert [(e.seq, e.type) for e in stored] == [(1, "START"), (2, "CHAT"), (3, "DONE")]
    assert stored[0].data == {
        "conversation": conversation.pk,
        "message": turn.event(0).data["message"],
    }
    assert stored[1].data == {"text": "All of it."}


def test_a_live_process_of_this_host_keeps_a_claim_whose_beats_were_held_up(project):
    """A claim of a process that runs here, its heartbeat just past the stale age (a database
    outage held the beats up), is not taken over; past ten times that age it is (the PID may
    be another process's by then)."""
    held_up = Conversation.objects.create(
        project=project,
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now() - timedelta(seconds=20),
        turn_owner=process_owner(),
    )
    long_gone = Conversation.objects.create(
        project=project,
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now() - timedelta(seconds=100),
        turn_owner=process_owner(),
    )
    elsewhere = Conversation.objects.create(
        project=project,
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now() - timedelta(seconds=20),
        turn_owner="elsewhere/pid:[1]:42:cafe",
    )

    assert held_up.running
    assert turn_claim_blocking(held_up.pk, uuid.uuid4()) is None
    assert not long_gone.running
    assert turn_claim_blocking(long_gone.pk, uuid.uuid4()) is False
    assert not elsewhere.running
    assert turn_claim_blocking(elsewhere.pk, uuid.uuid4()) is False


@pytest.mark.parametrize("others", [0, 30], ids=["alone", "beside-30"])
def test_a_beat_keeps_its_turns_claims_fresh_and_finds_one_taken_over(project, others):
    """One beat moves the heartbeat of each claim its turns hold, and only those: a claim
    another turn took over (a new turn_id) is left alone, and its turn is not among those
    the beat says kept theirs. Alike for a few turns (a statement compiled once for their
    count) and for many (the ORM's)."""
    ours, lost = uuid.uuid4(), uuid.uuid4()
    old = timezone.now() - timedelta(seconds=20)
    held = Conversation.objects.create(
        project=project, turn_id=ours, turn_heartbeat=old, turn_owner=process_owner()
    )
    taken = Conversation.objects.create(
        project=project, turn_id=uuid.uuid4(), turn_heartbeat=old, turn_owner=process_owner()
    )
    beside = [uuid.uuid4() for _ in range(others)]
    Conversation.objects.bulk_create(
        Conversation(project=project, turn_id=turn, turn_heartbeat=old) for turn in beside
    )

    assert turn_beats_blocking([ours, lost, *beside]) == {ours, *beside}

    held.refresh_from_db()
    taken.refresh_from_db()
    assert held.turn_heartbeat > old
    assert taken.turn_heartbeat == old
    assert held.running
    assert Conversation.objects.filter(turn_heartbeat=old).count() == 1  # the one taken over
    assert turn_beats_blocking([ours]) == {ours}  # all kept: no read after the update
