"""A running turn through a database outage: its writes are retried for a bounded time, and
what it showed but could not store is written back once the database is back.

The retry budget is the process's, counted from when the database first failed: every turn
waiting on one outage gives up together, ROJO_DB_RETRY_SECONDS after it began, and a turn
that then tries again (its last text, its end) does not wait the whole budget once more.
A turn that gave up ends with an error saying the database could not be reached; its text
so far stays in memory (History.unsaved) and is stored with the turn's end, by a task that
tries again every few seconds for as long as the process runs (up to WRITEBACK_SECONDS), and
only while the conversation is still this turn's.
"""

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from roject.db_threads import db_context

from .errors import DatabaseUnreachable
from .models import Conversation, Message, TurnRecord
from .turn_claims import turn_release_blocking

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What a database out of reach raises (a pool that timed out waiting is an OperationalError).
DB_DOWN = (OperationalError, InterfaceError)
WRITEBACK_SECONDS = 600
WRITEBACK_EVERY_SECONDS = 2

UNREACHABLE = (
    "The database could not be reached{spell}, so this reply stopped; what it had written "
    "is kept and stored once the database is back."
)

_down_since: float | None = None  # when this process's database trips began to fail
_tried_at = 0.0  # when a trip last failed


def unreachable(*, retried: bool = True) -> DatabaseUnreachable:
    """The error a turn ends with; `retried`: after ROJO_DB_RETRY_SECONDS of tries."""
    spell = f" for {settings.ROJO_DB_RETRY_SECONDS:g} seconds" if retried else ""
    return DatabaseUnreachable(UNREACHABLE.format(spell=spell))


async def db_retrying(call: Callable[[], Awaitable[T]]) -> T:
    """Await `call()` (one trip to the database), again after each failure to reach the
    database, until ROJO_DB_RETRY_SECONDS after the outage began; then DatabaseUnreachable.

    Past that time a trip is still tried, but at most one every WRITEBACK_EVERY_SECONDS:
    each may wait the pool's whole timeout for a connection, and a turn that gave up must
    not wait it again for each of its last writes.
    """
    global _down_since, _tried_at
    delay = 0.25
    while True:
        spent = _down_since is not None and (
            time.monotonic() - _down_since >= settings.ROJO_DB_RETRY_SECONDS
        )
        if spent and time.monotonic() - _tried_at < WRITEBACK_EVERY_SECONDS:
            raise unreachable()
        started = time.monotonic()  # a trip may wait the pool's timeout before it fails
        try:
            value = await call()
        except DB_DOWN as exc:
            if not _out_of_reach(exc):
                raise  # the server answered, refusing this write: no outage to wait out
            now = _tried_at = time.monotonic()
            _down_since = _down_since or started
            if now - _down_since >= settings.ROJO_DB_RETRY_SECONDS:
                raise unreachable() from exc
            logger.warning("the database could not be reached; trying again (%s)", exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2)
            continue
        _down_since = None
        return value


def _out_of_reach(exc: Exception) -> bool:
    """Whether a database error means the server could not be reached (or had no room for
    the connection), not that it refused the statement: PostgreSQL's SQLSTATE classes 08
    (connection), 53 (resources) and 57 (shut down), or no SQLSTATE at all (a pool that
    timed out, SQLite's locks)."""
    state = getattr(exc.__cause__, "sqlstate", None)
    return state is None or state[:2] in ("08", "53", "57")


def turn_end_blocking(turn, turn_id: uuid.UUID, history) -> None:
    """(Blocking) Store the text the turn could not, answer its open calls, record how it
    ended and give the conversation up: one transaction, and only while the conversation is
    still this turn's (else a later turn took it over and repaired it)."""
    from .history import unanswered_calls  # history imports this module

    with transaction.atomic():
        ours = Conversation.objects.select_for_update().filter(
            pk=turn.conversation_id, turn_id=turn_id
        )
        left = history.unsaved is not None or unanswered_calls(history.messages)
        if left and ours.exists():
            if history.unsaved is not None:
                _unsaved_store(history)
            history.close_open_calls_blocking()
        TurnRecord.objects.filter(pk=turn.record_id).update(
            status=turn.status,
            error=turn.error.get("message", ""),
            error_code=turn.error.get("code", ""),
            finished=timezone.now(),
        )
        turn_release_blocking(turn.conversation_id, turn_id)


def _unsaved_store(history) -> None:
    from .drafts import draft_append_blocking  # drafts imports this module

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
