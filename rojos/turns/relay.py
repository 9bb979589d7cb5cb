"""Following a turn that runs in another server process, over the Channels layer.

The process running the turn listens on its conversation's group (turn_listen) for Stop,
approvals (rojos.turns.control) and follow requests, and relays the turn's events to a
follower elsewhere (_relay), in batches, from its kept log: a follower that falls behind
gets its backlog late, not never. The follower (turn_follow_remote) checks the turn's claim
whenever the relay goes quiet: a turn whose process is gone is ended there and then
(ERROR `interrupted`, DONE), one that finished gets its stored events, and one still alive
is asked again from where the follower is (after a Redis restart, say).

Every failure of the layer (Redis timing out, restarting, down) is waited out and retried on
both sides; only a follower that cannot even ask is told, with an ERROR saying to retry.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

from rojos import metrics
from rojos.agent.events import WireEvent
from rojos.models import Conversation
from rojos.turns.approval_waits import approval_deliver
from rojos.turns.channel_reader import ChannelReader
from rojos.turns.control_layer import control_layer
from rojos.turns.ended_events import interrupted_events, stored_turn_events
from rojos.turns.events import RUN_KINDS
from rojos.turns.questions import question_deliver
from rojos.turns.repair import dead_turn_end

logger = logging.getLogger(__name__)

# A relay pings its follower this often through quiet spells (an approval can take minutes);
# a follower checks the turn's claim after FOLLOW_CHECK_SECONDS without word, and asks again
# after FOLLOW_SILENCE_SECONDS (its relay was lost). A relay gives up sending after as long.
FOLLOW_PING_SECONDS = 5
FOLLOW_CHECK_SECONDS = 2
FOLLOW_SILENCE_SECONDS = 12
LAYER_RETRY_SECONDS = 1
# One relayed message carries up to this many events, or about this many characters.
BATCH_EVENTS = 256
BATCH_CHARS = 64_000

# What a failing channel layer raises: Redis timing out (its own TimeoutError, a RedisError),
# restarting or refusing connections.
LAYER_ERRORS = (OSError, RedisError)

RELAY_DOWN = (
    "The server cannot reach its message relay to follow this reply; it keeps running. "
    "Reconnecting…"
)


def turn_group(conversation_id: int) -> str:
    return f"rojo-turn-{conversation_id}"


async def turn_listen(layer, channel: str, turn, task: asyncio.Task) -> None:
    """Messages for the running turn, from whichever process received the request.

    A failing channel layer does not end the listening: Stop and approvals must still reach
    the turn once it is back; and the turn's place in its group is renewed every heartbeat,
    since a restarted Redis forgets its groups. An unexpected error is logged and listening
    goes on: a listener that ended silently left its turn deaf to Stop for the rest of it.
    """
    keeper = asyncio.create_task(_group_keep(layer, channel, turn.conversation_id))
    try:
        while True:
            try:
                message = await layer.receive(channel)
                if await _handle(layer, message, turn, task):
                    return
            except (TimeoutError, *LAYER_ERRORS):
                logger.info("turn %s: the channel layer failed", turn.conversation_id)
                await asyncio.sleep(LAYER_RETRY_SECONDS)
            except Exception:
                logger.exception("turn %s: listening for Stop failed", turn.conversation_id)
                await asyncio.sleep(LAYER_RETRY_SECONDS)
    finally:
        keeper.cancel()


async def _handle(layer, message: dict, turn, task: asyncio.Task) -> bool:
    """Act on one message for the turn; True when it was a Stop (listening ends)."""
    kind = message.get("type")
    if kind == "turn.stop":
        await _ack(layer, message, ok=True)
        task.cancel()
        return True
    if kind == "turn.approval":
        delivered = approval_deliver(
            turn,
            message.get("call"),
            approve=bool(message.get("approve")),
            allow_tool=bool(message.get("allow")),
        )
        await _ack(layer, message, ok=delivered)
    elif kind == "turn.question":  # an answer to a server's question (rojos.turns.questions)
        refused = question_deliver(
            turn,
            question_id=message.get("question"),
            user_id=message.get("user"),
            action=message.get("action"),
            content=message.get("content"),
        )
        await _ack(layer, message, ok=refused is None)
    elif kind == "turn.follow":
        after = message["after"]
        if message.get("turn") not in (None, turn.message_id):
            after = 0  # asked for another turn (one that ended): this one from its START
        for relay in [r for r in turn.relays if r.get_name() == message.get("replaces")]:
            relay.cancel()  # its follower missed a message of it and asked again
        # Events go over the default layer: `layer` carries control messages only.
        relay = _relay(get_channel_layer(), turn, message["channel"], after)
        relay = asyncio.create_task(relay, name=message["channel"])
        turn.relays.add(relay)
        relay.add_done_callback(turn.relays.discard)
    return False


async def _ack(layer, message: dict, *, ok: bool) -> None:
    """Tell the process that sent `message` that the turn received it (rojos.turns.control)."""
    if message.get("reply"):
        with contextlib.suppress(ChannelFull, *LAYER_ERRORS):  # the sender then says retry
            await layer.send(message["reply"], {"type": "turn.ack", "ok": ok})


async def _group_keep(layer, channel: str, conversation_id: int) -> None:
    while True:
        await asyncio.sleep(settings.ROJO_TURN_HEARTBEAT_SECONDS)
        with contextlib.suppress(*LAYER_ERRORS):
            await layer.group_add(turn_group(conversation_id), channel)


async def _relay(layer, turn, channel: str, after: int) -> None:
    """Send a turn's events to a client re-attached through another process, in batches.

    An `after` this turn never gave starts from the beginning, as Turn.follow does.
    """
    position = max(after, 0)
    if position > turn.seq:
        position = 0
    while True:
        if position < turn.seq:
            # `after`: where the batch goes on from, for the follower to see that none is lost.
            message = {"type": "turn.events", "after": position}
            message["events"], position = _batch(turn, position)
            if not await _send(layer, channel, message):
                return
            continue
        if turn.finished:
            return
        try:
            await asyncio.wait_for(turn.changed(), FOLLOW_PING_SECONDS)
        except TimeoutError:
            if not await _send(layer, channel, {"type": "turn.ping"}):
                return


def _batch(turn, position: int) -> tuple[list[list], int]:
    """The events from `position` on that fit one message, as [seq, type, data]; and the
    position after them."""
    events, size = [], 0
    while len(events) < BATCH_EVENTS and size < BATCH_CHARS:
        event = turn.events.after(position)  # a run of CHAT chunks comes joined
        if event is None:
            break
        events.append([event.seq, event.type, event.data])
        size += len(event.data["text"]) if event.type in RUN_KINDS else 200
        position = event.seq
    return events, position


async def _send(layer, channel: str, message: dict) -> bool:
    """Send to a follower, waiting while its channel is full or the layer fails; False once
    that lasted FOLLOW_SILENCE_SECONDS (the follower then asks again from where it is)."""
    give_up = time.monotonic() + FOLLOW_SILENCE_SECONDS
    delay = 0.05
    while True:
        try:
            await layer.send(channel, message)
            return True
        except (ChannelFull, *LAYER_ERRORS):
            if time.monotonic() > give_up:
                logger.warning("gave up relaying to a follower of a turn: it stayed unreachable")
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1)


async def turn_follow_remote(
    conversation_id: int, after: int, *, turn: int | None = None
) -> AsyncIterator[WireEvent]:
    """Follow a turn that runs in another process: it relays its events over the layer.

    `turn` names the turn `after` counts in (rojos.turns.reattach): a relay of another turn
    sends its own from START. Ends with the turn's DONE; with ERROR `interrupted` and DONE
    when its process is gone; with ERROR `unavailable` (no DONE: the turn goes on) when the
    layer cannot be reached. A relayed message that does not go on from the last event
    received (one before it was lost on the way) has the relay asked again from there.
    """
    layer = get_channel_layer()
    seq, reader, replaced, heard = after, None, None, time.monotonic()
    try:
        while True:
            if reader is None:
                reader = ChannelReader(layer, await layer.new_channel())
                asked = {"type": "turn.follow", "channel": reader.channel, "after": seq}
                asked.update(turn=turn, replaces=replaced)
                try:
                    await control_layer().group_send(turn_group(conversation_id), asked)
                except LAYER_ERRORS:
                    logger.warning("could not ask for the turn of conversation %s", conversation_id)
                    yield relay_unavailable()
                    return
                heard, fresh = time.monotonic(), True
            message = await _receive(reader)
            if message is not None:
                heard = time.monotonic()
                if message.get("after", seq) > seq:
                    logger.warning("a relayed message of conversation %s was lost", conversation_id)
                    metrics.retries.labels(service="relay").inc()
                    reader.close()  # ask again from the last event received
                    replaced, reader = reader.channel, None
                    continue
                for event in _events_of(message):
                    if event.seq <= seq and not (fresh and event.seq == 1):
                        continue  # sent already, by a relay asked before
                    fresh, seq = False, event.seq
                    yield event
                    if event.type == "DONE":
                        return
                continue
            ending = await _turn_ended(conversation_id, seq)
            if ending is not None:
                for event in ending:
                    yield event
                return
            if time.monotonic() - heard > FOLLOW_SILENCE_SECONDS:
                reader.close()  # the relay was lost (Redis restarted, or it gave up): ask again
                metrics.retries.labels(service="relay").inc()
                replaced, reader = None, None
    finally:
        if reader is not None:
            reader.close()


async def _receive(reader: ChannelReader) -> dict | None:
    """The next message on the channel, or None after FOLLOW_CHECK_SECONDS without one (or a
    failing layer: Redis' own read timeouts end here, never the follow)."""
    try:
        return await reader.next(FOLLOW_CHECK_SECONDS)
    except LAYER_ERRORS:
        await asyncio.sleep(LAYER_RETRY_SECONDS)
        return None


def _events_of(message: dict) -> list[WireEvent]:
    if message.get("type") == "turn.events":
        return [WireEvent(seq, kind, data) for seq, kind, data in message["events"]]
    if message.get("type") == "turn.event":  # one event, as a process of an older version sends
        return [WireEvent(message["seq"], message["kind"], message["data"])]
    return []


async def _turn_ended(conversation_id: int, seq: int) -> list[WireEvent] | None:
    """How a quiet turn ended, as the events the follower still needs: None while it runs.

    Its process gone: the turn is ended here, ERROR `interrupted` and DONE. Finished (its
    DONE not relayed): its stored events. A database out of reach: None, ask again later.
    """
    try:
        conversation = await Conversation.objects.aget(pk=conversation_id)
        if conversation.turn_id is None:
            return await stored_turn_events(conversation)
        if await dead_turn_end(conversation):
            return interrupted_events(seq)
    except DatabaseError:
        logger.warning("could not check the turn of conversation %s", conversation_id)
    return None


def relay_unavailable() -> WireEvent:
    """An unnumbered ERROR for a follower that cannot reach the relay; `retry` in seconds."""
    return WireEvent(0, "ERROR", {"message": RELAY_DOWN, "code": "unavailable", "retry": 2})
