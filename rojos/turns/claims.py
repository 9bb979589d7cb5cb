"""One turn per conversation: the claim in the database, and the heartbeat that keeps it.

The claim is a column of the conversation, so the rule holds across server processes; a
claim whose heartbeat stopped, or whose owner is a gone process of this host
(rojos.models.claims), may be taken over by the next message.
"""

import asyncio
import contextvars
import functools
import logging
import uuid
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from roject.server.db_threads import db_context
from roject.server.prepared_queries import PreparedQuery
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
    # approval_waiting: a crashed turn's wait (its stored calls: rojos.turns.repair)
    if dead is not None and rows.filter(dead).update(**claim, approval_waiting=None):
        return False
    return None


def turn_beats_blocking(turn_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """(Blocking) Move the heartbeat of each claim held by one of `turn_ids` to now; the
    turns whose claims are still theirs (a turn missing was taken over). One UPDATE for
    them all (a turn's id is drawn for it: no two claims share one), and a read only when
    fewer rows than turns were kept."""
    kept: set[uuid.UUID] = set()
    now = timezone.now()
    for begin in range(0, len(turn_ids), _BEATS_AT_ONCE):
        some = turn_ids[begin : begin + _BEATS_AT_ONCE]
        if len(some) <= _BEATS_PREPARED:
            beaten = _beat_of(len(some)).update(*some, turn_heartbeat=now)
        else:
            beaten = Conversation.objects.filter(turn_id__in=some).update(turn_heartbeat=now)
        if beaten == len(some):
            kept.update(some)
        else:
            rows = Conversation.objects.filter(turn_id__in=some)
            kept.update(rows.values_list("turn_id", flat=True))
    return kept


_BEATS_AT_ONCE = 500  # turn ids in one statement: far under SQLite's limit on parameters
# A process running up to this many turns beats them with a statement compiled once for
# each count: a paced reply's five beats took 4.9 ms of a database thread's CPU through the
# ORM, 3.0 to 3.5 ms so (docs/performance.md, section 10).
_BEATS_PREPARED = 16


@functools.cache
def _beat_of(count: int) -> PreparedQuery:
    """The claims of `count` turns, by their ids."""
    return PreparedQuery(
        lambda *ids: Conversation.objects.filter(turn_id__in=ids), *(uuid.UUID,) * count
    )


def turn_release_blocking(conversation_id: int, turn_id: uuid.UUID) -> None:
    """Give the conversation up; the calls its turn left waiting leave every inbox."""
    released = _CLAIMED.update(
        conversation_id,
        turn_id,
        turn_id=None,
        turn_heartbeat=None,
        turn_owner="",
        approval_waiting=None,
        updated=timezone.now(),
    )
    if released:
        _PENDING.delete(conversation_id)


# Every turn's end runs both: compiled once (docs/performance.md, section 10).
_CLAIMED = PreparedQuery(
    lambda pk, turn_id: Conversation.objects.filter(pk=pk, turn_id=turn_id), int, uuid.UUID
)
_PENDING = PreparedQuery(
    lambda conversation_id: PendingApproval.objects.filter(conversation_id=conversation_id), int
)


async def turn_heartbeat(turn, turn_id: uuid.UUID, task: asyncio.Task) -> None:
    """Keep the turn's claim fresh until cancelled (turn_beat_start, as a task of its own)."""
    stop = turn_beat_start(turn, turn_id, task)
    try:
        await asyncio.get_running_loop().create_future()  # until the turn cancels this
    finally:
        stop()


def turn_beat_start(turn, turn_id: uuid.UUID, task: asyncio.Task) -> Callable[[], None]:
    """Keep the turn's claim fresh from now on; the function returned stops that.

    The claims of every turn running on this event loop are kept together, by one task in
    a lane of its own on the database threads: one UPDATE every ROJO_TURN_HEARTBEAT_SECONDS
    for them all, not a trip and a statement for each (docs/performance.md, section 10). A
    beat that fails (the database locked or out of reach for a moment) is tried again at
    the next; it holds up no turn's own writes. A claim found taken over (the beats failed
    for so long that another request judged this turn dead) stops the turn: `task` is
    cancelled, as two must never run in one conversation. The turn needs no task of its
    own for it: it is only put among the turns beaten, and taken off by stop().
    """
    loop = asyncio.get_running_loop()
    beats = _beats.get(loop)
    if beats is None:
        beats = _beats[loop] = _Beats(loop)
    beats.turns[turn_id] = (turn, task)

    def stop() -> None:
        if beats.turns.get(turn_id, (None,))[0] is turn:
            del beats.turns[turn_id]

    return stop


class _Beats:
    """The claims one event loop's running turns hold, and the task that beats them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.turns: dict[uuid.UUID, tuple] = {}  # turn id -> (turn, its task)
        # A fresh context: its own lane, not the turn's that happened to start it.
        self.task = loop.create_task(self._run(loop), context=contextvars.Context())

    async def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            async with db_context():
                while True:
                    await asyncio.sleep(settings.ROJO_TURN_HEARTBEAT_SECONDS)
                    if not self.turns:  # no turn left: the next one starts a beater anew
                        del _beats[loop]
                        return
                    await self._beat()
        finally:
            if _beats.get(loop) is self:
                del _beats[loop]

    async def _beat(self) -> None:
        beaten = dict(self.turns)
        try:
            kept = await sync_to_async(turn_beats_blocking)(list(beaten))
        except DatabaseError:
            ids = ", ".join(str(turn.conversation_id) for turn, _ in beaten.values())
            logger.warning("heartbeat of conversations %s failed", ids)
            return
        for turn_id, (turn, task) in beaten.items():
            # Not kept, and still running (a turn that ended meanwhile gave its claim up).
            if turn_id not in kept and self.turns.get(turn_id, (None,))[0] is turn:
                del self.turns[turn_id]
                turn.claim_lost = True
                task.cancel()


_beats: dict[asyncio.AbstractEventLoop, _Beats] = {}
