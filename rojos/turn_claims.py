"""One turn per conversation: the claim in the database, and the heartbeat that keeps it.

The claim is a column of the conversation, so the rule holds across server processes; a
claim whose heartbeat stopped, or whose owner is a gone process of this host
(rojos.turn_owner), may be taken over by the next message.
"""

import asyncio
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from .models import Conversation
from .turn_owner import owner_gone, process_owner

logger = logging.getLogger(__name__)


def turn_claim_blocking(conversation_id: int, turn_id: uuid.UUID) -> bool | None:
    """(Blocking) Claim a conversation for a turn: True when it was free, False when this took
    over the claim of a turn that a crash cut off (its heartbeat stopped), None when a turn
    is running. Only a takeover calls for repairs: every turn that ends gives its claim up
    in the transaction that records how it ended."""
    now = timezone.now()
    rows = Conversation.objects.filter(pk=conversation_id)
    claim = {"turn_id": turn_id, "turn_heartbeat": now, "turn_owner": process_owner()}
    if rows.filter(turn_id__isnull=True).update(**claim):
        return True
    stale = now - timedelta(seconds=settings.ROJO_TURN_STALE_SECONDS)
    if rows.filter(turn_heartbeat__lt=stale).update(**claim):
        return False
    owner = rows.values_list("turn_owner", flat=True).first()
    if owner and owner_gone(owner) and rows.filter(turn_owner=owner).update(**claim):
        return False
    return None


def turn_release_blocking(conversation_id: int, turn_id: uuid.UUID) -> None:
    Conversation.objects.filter(pk=conversation_id, turn_id=turn_id).update(
        turn_id=None, turn_heartbeat=None, turn_owner="", updated=timezone.now()
    )


async def turn_heartbeat(turn, turn_id: uuid.UUID, task: asyncio.Task) -> None:
    """Keep the turn's claim fresh while it runs.

    A beat that fails (the database locked or out of reach for a moment) is tried again at
    the next. A claim found taken over (the beats failed for so long that another request
    judged this turn dead) stops the turn: two must never run in one conversation.
    """
    while True:
        await asyncio.sleep(settings.ROJO_TURN_HEARTBEAT_SECONDS)
        try:
            kept = await Conversation.objects.filter(
                pk=turn.conversation_id, turn_id=turn_id
            ).aupdate(turn_heartbeat=timezone.now())
        except DatabaseError:
            logger.warning("heartbeat of conversation %s failed", turn.conversation_id)
            continue
        if not kept:
            turn.claim_lost = True
            task.cancel()
            return
