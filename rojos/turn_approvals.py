"""A turn's record says when one of its calls waits for approval: the conversation list's
"waiting for approval" badge, read from the database, so it shows in every server process."""

import asyncio
import logging

from django.db import DatabaseError

from .models import TurnRecord
from .turn_log import Turn

logger = logging.getLogger(__name__)


async def approval_marked(turn: Turn, call_id: str) -> bool:
    """Wait for a decision on a call, with the turn's record saying so meanwhile: the
    conversation list's "waiting for approval" badge, in any server process."""
    if turn.auto_approve is not None:
        return await turn.approval(call_id)
    await _record_status(turn, TurnRecord.Status.WAITING)
    try:
        return await turn.approval(call_id)
    finally:
        if not turn.approvals:  # none of the turn's other calls waits
            await asyncio.shield(_record_status(turn, TurnRecord.Status.RUNNING))


async def _record_status(turn: Turn, status: str) -> None:
    try:
        await TurnRecord.objects.filter(
            pk=turn.record_id, status__in=TurnRecord.UNFINISHED
        ).aupdate(status=status)
    except DatabaseError:  # a badge is not worth failing the turn for
        logger.warning("could not mark the turn of conversation %s", turn.conversation_id)
