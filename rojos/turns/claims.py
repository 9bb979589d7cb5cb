"""One turn per conversation: the claim in the database, and the heartbeat that keeps it.

The claim is a column of the conversation, so the rule holds across server processes; a
claim whose heartbeat stopped, or whose owner is a gone process of this host
(rojos.models.claims), may be taken over by the next message.
"""

import asyncio
import logging
import uuid

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connections, router
from django.utils import timezone

from rojos.models import Conversation, PendingApproval
from rojos.models.claims import dead_claim, process_owner

logger = logging.getLogger(__name__)


def turn_claim_blocking(
    conversation_id: int, turn_id: uuid.UUID, *, branch: int | None = None
) -> bool | None:
    """(Blocking) Claim a conversation for a turn: True when it was free, False when this took
    over the claim of a turn that a crash cut off (its heartbeat stopped), None when a turn
    is running (or, with `branch`, when its active branch is no longer that one). Only a
    takeover calls for repairs: every turn that ends gives its claim up in the transaction
    that records how it ended."""
    now = timezone.now()
    rows = Conversation.objects.filter(pk=conversation_id)
    if branch is not None:
        rows = rows.filter(branch=branch)
    claim = {"turn_id": turn_id, "turn_heartbeat": now, "turn_owner": process_owner()}
    if rows.filter(turn_id__isnull=True).update(**claim):
        return True
    held = rows.filter(turn_id__isnull=False).first()
    dead = dead_claim(held) if held is not None else None
    # approval_waiting: a crashed turn's wait
    if dead is not None and rows.filter(dead).update(**claim, approval_waiting=None):
        PendingApproval.objects.filter(conversation_id=conversation_id).delete()
        return False
    return None


def turn_beat_blocking(conversation_id: int, turn_id: uuid.UUID) -> int:
    """(Blocking) Move the claim's heartbeat to now; the rows kept (0: the claim was taken
    over). The UPDATE the ORM would build, written here: a beat of every running turn every
    ROJO_TURN_HEARTBEAT_SECONDS, and Django's filter, update and compiler cost about four
    times the statement (docs/performance.md, section 10)."""
    connection = connections[router.db_for_write(Conversation)]
    meta, name = Conversation._meta, connection.ops.quote_name
    beat, claim = meta.get_field("turn_heartbeat"), meta.get_field("turn_id")
    sql = (
        f"UPDATE {name(meta.db_table)} SET {name(beat.column)} = %s "
        f"WHERE {name(meta.pk.column)} = %s AND {name(claim.column)} = %s"
    )
    params = (
        beat.get_db_prep_save(timezone.now(), connection),
        conversation_id,
        claim.get_db_prep_value(turn_id, connection),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def turn_release_blocking(conversation_id: int, turn_id: uuid.UUID) -> None:
    """Give the conversation up; the calls its turn left waiting leave every inbox."""
    released = Conversation.objects.filter(pk=conversation_id, turn_id=turn_id).update(
        turn_id=None,
        turn_heartbeat=None,
        turn_owner="",
        approval_waiting=None,
        updated=timezone.now(),
    )
    if released:
        PendingApproval.objects.filter(conversation_id=conversation_id).delete()


async def turn_heartbeat(turn, turn_id: uuid.UUID, task: asyncio.Task) -> None:
    """Keep the turn's claim fresh while it runs.

    A beat that fails (the database locked or out of reach for a moment) is tried again at
    the next. A claim found taken over (the beats failed for so long that another request
    judged this turn dead) stops the turn: two must never run in one conversation.
    """
    while True:
        await asyncio.sleep(settings.ROJO_TURN_HEARTBEAT_SECONDS)
        try:
            kept = await sync_to_async(turn_beat_blocking)(turn.conversation_id, turn_id)
        except DatabaseError:
            logger.warning("heartbeat of conversation %s failed", turn.conversation_id)
            continue
        if not kept:
            turn.claim_lost = True
            task.cancel()
            return
