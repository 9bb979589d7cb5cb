"""Messages between server processes about a running turn, over the Channels layer.

Stop, approve and follow requests may land on any process; the one running the turn listens
on its group and acts, or relays the turn's events to a follower elsewhere.
"""

import asyncio
import logging
from collections.abc import AsyncIterator

from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from redis.exceptions import RedisError

from .events import DoneEvent
from .history import call_open
from .models import Conversation
from .wire import WireEvent, numbered

logger = logging.getLogger(__name__)

# A turn relaying to another process pings it this often; that long without word, it is gone.
FOLLOW_PING_SECONDS = 10
FOLLOW_SILENCE_SECONDS = 30
LAYER_RETRY_SECONDS = 1


def turn_group(conversation_id: int) -> str:
    return f"rojo-turn-{conversation_id}"


async def turn_listen(layer, channel: str, turn, task: asyncio.Task) -> None:
    """Messages for the running turn, from whichever process received the request.

    A failing channel layer (Redis timing out or restarting) does not end the listening:
    Stop and approvals must still reach the turn once it is back. Anything else (a layer
    used wrongly) ends it, as before.
    """
    while True:
        try:
            message = await layer.receive(channel)
        except (OSError, TimeoutError, RedisError):
            logger.warning("turn %s: the channel layer failed", turn.conversation_id, exc_info=True)
            await asyncio.sleep(LAYER_RETRY_SECONDS)
            continue
        if message.get("type") == "turn.stop":
            task.cancel()
            return
        if message.get("type") == "turn.approval":
            waiting = turn.approvals.get(message.get("call"))
            if waiting is not None and not waiting.done():
                waiting.set_result(bool(message.get("approve")))
        if message.get("type") == "turn.follow":
            relay = asyncio.create_task(_relay(layer, turn, message["channel"], message["after"]))
            turn.relays.add(relay)
            relay.add_done_callback(turn.relays.discard)


async def _relay(layer, turn, channel: str, after: int) -> None:
    """Send a turn's events to a client re-attached through another process."""
    position = max(after, 0)
    try:
        while True:
            while position < turn.seq:
                event = turn.event(position)
                position += 1
                await layer.send(
                    channel,
                    {
                        "type": "turn.event",
                        "seq": event.seq,
                        "kind": event.type,
                        "data": event.data,
                    },
                )
            if turn.finished:
                return
            try:
                await asyncio.wait_for(turn.changed(), FOLLOW_PING_SECONDS)
            except TimeoutError:
                await layer.send(channel, {"type": "turn.ping"})
    except ChannelFull:
        logger.warning("a remote follower of conversation %s fell behind", turn.conversation_id)


async def turn_follow_remote(conversation_id: int, after: int) -> AsyncIterator[WireEvent]:
    """Follow a turn that runs in another process: it relays its events over the layer.

    The process running the turn pings through quiet spells (an approval can take minutes);
    silence beyond that means it is gone, and the stream ends for the client to reload.
    """
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_send(
        turn_group(conversation_id), {"type": "turn.follow", "channel": channel, "after": after}
    )
    while True:
        try:
            message = await asyncio.wait_for(layer.receive(channel), FOLLOW_SILENCE_SECONDS)
        except TimeoutError:
            yield numbered(0, DoneEvent())
            return
        if message.get("type") != "turn.event":
            continue
        event = WireEvent(message["seq"], message["kind"], message["data"])
        yield event
        if event.type == "DONE":
            return


async def turn_approve(*, conversation: Conversation, call_id: str, approve: bool) -> str | None:
    """Deliver a decision on a call waiting for approval, to whichever process runs the turn.

    Returns why it was not delivered, or None.
    """
    if not await Conversation.objects.running().filter(pk=conversation.pk).aexists():
        return "No reply is running in this conversation."
    if not await call_open(conversation.pk, call_id):
        return (
            "That tool call is not waiting for a decision: it was decided already, or it is "
            "not one of this reply's calls."
        )
    await get_channel_layer().group_send(
        turn_group(conversation.pk), {"type": "turn.approval", "call": call_id, "approve": approve}
    )
    return None


async def turn_stop(*, conversation: Conversation) -> bool:
    """Ask the conversation's running turn to stop, in whichever process it runs."""
    running = await Conversation.objects.running().filter(pk=conversation.pk).aexists()
    if running:
        await get_channel_layer().group_send(turn_group(conversation.pk), {"type": "turn.stop"})
    return running
