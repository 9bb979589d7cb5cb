"""A database out of reach, waited out: one trip retried for a bounded time.

The retry budget is the process's, counted from when the database first failed: every turn
waiting on one outage gives up together, ROJO_DB_RETRY_SECONDS after it began, and a turn
that then tries again (its last text, its end) does not wait the whole budget once more.
Used by the turn's writes (rojos.agent.history, rojos.agent.drafts) and by the write-back of
its end (rojos.turns.writeback).
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError

from rojos import metrics
from rojos.errors import DatabaseUnreachable

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What a database out of reach raises (a pool that timed out waiting is an OperationalError).
DB_DOWN = (OperationalError, InterfaceError)
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
            metrics.retries.labels(service="database").inc()
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
