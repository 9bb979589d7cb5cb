"""Stop and approvals, delivered to the running turn in whichever process runs it.

Each is a request-reply over the channel layer: the turn's listener (rojos.turns.relay)
acknowledges what it received, and only an acknowledged Stop or decision is reported as
done. No acknowledgement within ROJO_RELAY_CONFIRM_SECONDS is a TurnUnreachable (503, try
again), never a delivery that may have been lost; unless the turn's process turns out to be
gone, in which case the turn is ended there and then. A turn of this very process is told
directly.
"""

import asyncio
from datetime import datetime

from django.conf import settings
from django.db.models import Q

from rojos.agent.history import call_open
from rojos.errors import TurnUnreachable
from rojos.models import Conversation
from rojos.turns.approval_waits import approval_deliver
from rojos.turns.control_layer import control_layer
from rojos.turns.log import Turn
from rojos.turns.questions import NOT_ASKED, question_deliver
from rojos.turns.registry import turn_get
from rojos.turns.relay import LAYER_ERRORS, turn_group
from rojos.turns.repair import dead_turn_end

NOT_RUNNING = "No reply is running in this conversation."
NOT_WAITING = (
    "That tool call is not waiting for a decision: it was decided already, or it is not one "
    "of this reply's calls."
)


def _running_here(conversation_id: int) -> Turn | None:
    """The conversation's turn if it runs in this process: told directly, not over the layer."""
    turn = turn_get(conversation_id)
    if turn is None or turn.finished or turn.task is None or turn.task.done():
        return None
    return turn


async def _ask(conversation_id: int, message: dict) -> dict | None:
    """Send `message` to the conversation's turn and wait for its acknowledgement; None when
    none came in time. A layer that fails on the way raises (the API answers 503)."""
    layer = control_layer()
    reply = await layer.new_channel()
    await layer.group_send(turn_group(conversation_id), {**message, "reply": reply})
    try:
        async with asyncio.timeout(settings.ROJO_RELAY_CONFIRM_SECONDS):
            while True:
                try:
                    answer = await layer.receive(reply)
                except LAYER_ERRORS:  # Redis' own read timeout, or a restart: wait on
                    await asyncio.sleep(0.2)
                    continue
                if answer.get("type") == "turn.ack":
                    return answer
    except TimeoutError:
        return None


async def _silent_turn_end(conversation: Conversation, beat: datetime | None) -> bool:
    """After a request went unanswered: end the turn if its process is gone, known by its
    owner or by a heartbeat that did not move through the wait (which spans two beats)."""
    fresh = await Conversation.objects.aget(pk=conversation.pk)
    if await dead_turn_end(fresh):
        return True
    waited = settings.ROJO_RELAY_CONFIRM_SECONDS
    if beat is None or waited < 2 * settings.ROJO_TURN_HEARTBEAT_SECONDS:
        return False
    return await dead_turn_end(fresh, silent=Q(turn_heartbeat=beat))


async def turn_stop(*, conversation: Conversation) -> bool:
    """Stop the conversation's running turn; False when none runs.

    A turn whose process is gone is ended at once, as interrupted. Raises TurnUnreachable
    when the turn runs but did not confirm the Stop.
    """
    if await dead_turn_end(conversation):
        return True  # its process is gone: it ended now
    if not conversation.running:
        return False
    if (here := _running_here(conversation.pk)) is not None:
        here.stop()
        return True
    if await _ask(conversation.pk, {"type": "turn.stop"}) is not None:
        return True
    if await _silent_turn_end(conversation, conversation.turn_heartbeat):
        return True
    if not await Conversation.objects.running().filter(pk=conversation.pk).aexists():
        return False  # it ended meanwhile
    raise TurnUnreachable("The reply could not be reached to stop it; try again in a moment.")


async def turn_approve(
    *, conversation: Conversation, call_id: str, approve: bool, allow_tool: bool = False
) -> str | None:
    """Deliver a decision on a call waiting for approval, to whichever process runs the turn;
    with `allow_tool`, an approval also allows the call's tool for the rest of the
    conversation, stored by the turn once it received it (nothing, when it came too late).

    Returns why it was not delivered, or None once the turn confirmed it received it.
    Raises TurnUnreachable when the turn did not confirm.
    """
    if await dead_turn_end(conversation) or not conversation.running:
        return NOT_RUNNING
    if not await call_open(conversation, call_id):
        return NOT_WAITING
    if (here := _running_here(conversation.pk)) is not None:
        delivered = approval_deliver(here, call_id, approve=approve, allow_tool=allow_tool)
        return None if delivered else NOT_WAITING
    message = {"type": "turn.approval", "call": call_id, "approve": approve, "allow": allow_tool}
    answer = await _ask(conversation.pk, message)
    if answer is not None:
        return None if answer.get("ok") else NOT_WAITING
    if await _silent_turn_end(conversation, conversation.turn_heartbeat):
        return NOT_RUNNING
    raise TurnUnreachable(
        "The decision could not be delivered to the reply; try again in a moment."
    )


async def turn_answer(
    *, conversation: Conversation, user, question_id: str, action: str, content: dict | None
) -> str | None:
    """Deliver `user`'s answer to a server's question in the running turn (only the turn's
    own user may answer it), to whichever process runs the turn.

    Returns why it was not delivered, or None once the turn confirmed it received it.
    Raises TurnUnreachable when the turn did not confirm.
    """
    if await dead_turn_end(conversation) or not conversation.running:
        return NOT_RUNNING
    answer = {"question_id": question_id, "user_id": user.pk, "action": action}
    if (here := _running_here(conversation.pk)) is not None:
        return question_deliver(here, **answer, content=content)
    message = {
        "type": "turn.question",
        "question": question_id,
        "user": user.pk,
        "action": action,
        "content": content,
    }
    reply = await _ask(conversation.pk, message)
    if reply is not None:
        return None if reply.get("ok") else NOT_ASKED
    if await _silent_turn_end(conversation, conversation.turn_heartbeat):
        return NOT_RUNNING
    raise TurnUnreachable("The answer could not be delivered to the reply; try again in a moment.")
