"""A running turn through a database outage: its writes are retried for a bounded time, and
what it showed but could not store is written back once the database is back.

The retry budget is the process's (rojos.db.db_retrying). A turn that gave up ends with an
error saying the database could not be reached; its text so far stays in memory
(History.unsaved) and is stored with the turn's end, by a task that tries again every few
seconds for as long as the process runs (up to WRITEBACK_SECONDS), and only while the
conversation is still this turn's; so is what its responses used (History.unsaved_usage).
"""

import asyncio
import contextvars
import logging
import time
import uuid

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from roject.server.db_threads import db_context
from roject.server.prepared_queries import PreparedQuery
from rojos.agent.history import unanswered_calls
from rojos.db import WRITEBACK_EVERY_SECONDS, db_retrying
from rojos.errors import DatabaseUnreachable
from rojos.models import Conversation, Message, TurnRecord
from rojos.turns.claims import turn_release_blocking

logger = logging.getLogger(__name__)

_RECORD = PreparedQuery(lambda pk: TurnRecord.objects.filter(pk=pk), int)  # compiled once

WRITEBACK_SECONDS = 600


def turn_end_blocking(turn, turn_id: uuid.UUID, history) -> None:
    """(Blocking) Store the text and the usage the turn could not, answer its open calls,
    record how it ended and give the conversation up: one transaction, and only while the
    conversation is still this turn's (else a later turn took it over and repaired it)."""
    with transaction.atomic():
        ours = Conversation.objects.select_for_update().filter(
            pk=turn.conversation_id, turn_id=turn_id
        )
        left = history.unsaved is not None or unanswered_calls(history.messages)
        if (left or history.unsaved_usage) and ours.exists():
            if history.unsaved is not None:
                _unsaved_store(history)
            history.close_open_calls_blocking()
            for usage in history.unsaved_usage:
                usage.save(force_insert=True)
        _ended(turn, turn_id)


def turn_end_record(turn, turn_id: uuid.UUID) -> None:
    """(Blocking) Record how a turn whose task never ran ended and give the conversation
    up: one transaction."""
    with transaction.atomic():
        _ended(turn, turn_id)


def _ended(turn, turn_id: uuid.UUID) -> None:
    """(Blocking, in the caller's transaction) The turn's record says how it ended; the
    conversation is given up."""
    if turn.record_id is not None:
        _RECORD.update(
            turn.record_id,
            status=turn.status,
            error=turn.error.get("message", ""),
            error_code=turn.error.get("code", ""),
            finished=timezone.now(),
        )
    turn_release_blocking(turn.conversation_id, turn_id)


def _unsaved_store(history) -> None:
    from rojos.agent.drafts import draft_append_blocking  # drafts imports this module

    draft, text, after = history.unsaved
    if draft is not None and draft.pk is not None:
        draft.content = draft_append_blocking(draft.pk, text, after=after, whole=True, draft=False)
        draft.draft = False
    else:
        history.append_blocking(role=Message.Role.ASSISTANT, content=text)
    history.unsaved = None


async def turn_end(turn, turn_id: uuid.UUID, history) -> None:
    """Record the turn's end (with what it could not store); through an outage, retried,
    then left to a task that writes it back once the database is back."""
    try:
        await db_retrying(lambda: sync_to_async(turn_end_blocking)(turn, turn_id, history))
    except DatabaseUnreachable:
        # A context of its own: the turn's database thread ends with the turn.
        task = asyncio.create_task(
            _write_back_later(turn, turn_id, history), context=contextvars.Context()
        )
        _pending.add(task)
        task.add_done_callback(_pending.discard)


_pending: set[asyncio.Task] = set()


async def _write_back_later(turn, turn_id: uuid.UUID, history) -> None:
    give_up = time.monotonic() + WRITEBACK_SECONDS
    async with db_context():
        while time.monotonic() < give_up:
            await asyncio.sleep(WRITEBACK_EVERY_SECONDS)
            try:
                await db_retrying(lambda: sync_to_async(turn_end_blocking)(turn, turn_id, history))
            except DatabaseUnreachable:
                continue
            logger.warning("conversation %s: the turn's end was stored late", turn.conversation_id)
            return
    logger.error("conversation %s: the turn's end could not be stored", turn.conversation_id)
