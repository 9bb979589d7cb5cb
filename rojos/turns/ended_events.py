"""What the followers of a turn get when no live log tells them: the turn as stored (it
finished, or its log was in a process that is gone), or the end of one whose process is gone.
A re-attach (rojos.web.api) and a follower on another process (rojos.turns.relay) use them."""

from asgiref.sync import sync_to_async

from rojos.agent.events import DoneEvent, ErrorEvent, WireEvent, numbered
from rojos.agent.stored_events import conversation_turns
from rojos.models import Conversation, Message, TurnRecord
from rojos.turns.repair import INTERRUPTED_MESSAGE


def interrupted_events(seq: int) -> list[WireEvent]:
    """What the followers of a turn whose process is gone are told, after event `seq`."""
    error = ErrorEvent(message=INTERRUPTED_MESSAGE, code="interrupted")
    return [numbered(seq + 1, error), numbered(seq + 2, DoneEvent())]


async def stored_turn_events(conversation: Conversation) -> list[WireEvent]:
    """The conversation's last turn as stored, numbered from 1: for a re-attach whose live log
    is in another process or gone. A START numbered 1 tells a client that had events of it
    that this is the whole turn again."""
    return await sync_to_async(_stored_turn_events)(conversation)


def _stored_turn_events(conversation: Conversation) -> list[WireEvent]:
    last_user = (
        Message.objects.filter(conversation=conversation, role=Message.Role.USER)
        .order_by("-position")
        .first()
    )
    if last_user is None:
        return [numbered(1, DoneEvent())]
    messages = list(
        Message.objects.filter(conversation=conversation, position__gte=last_user.position)
    )
    records = list(TurnRecord.objects.filter(user_message=last_user))
    _, events = conversation_turns(conversation, messages=messages, records=records)[-1]
    return [numbered(seq, event) for seq, event in enumerate(events, start=1)]
