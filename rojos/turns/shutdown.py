"""A process's turns when it shuts down (roject/server/graceful.py calls `turns_drain`): the
running ones may finish within the grace period; the rest end as interrupted, their text
kept and their followers told, never killed mid-write.

An interrupted turn ends as a Stop does (its task cancelled, its calls answered, its record
written, its conversation given up), with the INTERRUPTED status and a message saying why.
"""

import asyncio
import logging
from collections.abc import Iterable

from .log import Turn
from .registry import turns_running, turns_starting

logger = logging.getLogger(__name__)

# How long the interrupted turns get to record their end (their last writes).
END_SECONDS = 20


async def turns_drain(*, grace: float) -> None:
    """Wait up to `grace` seconds for this process's running turns, then interrupt the rest
    and wait for them to record their end.

    Starts under way as the drain began (past the draining check: rojos.turns.start) are
    waited for first: the turns they become are running turns too. Read only once, before,
    the list lacked them, and such a turn ran on past the stop, its reply cut mid-stream.
    """
    loop = asyncio.get_running_loop()
    grace_ends = loop.time() + grace
    await _settled(turns_starting(), until=grace_ends)
    running: list[Turn] = turns_running()
    if running:
        logger.info("waiting for %d running turns (up to %s s)", len(running), grace)
        await _settled((turn.task for turn in running), until=grace_ends)
    end = loop.time() + END_SECONDS
    await _settled(turns_starting(), until=end)  # a start slower than the grace (a busy database)
    left = turns_running()
    if not left:
        return
    logger.warning("interrupting %d turns still running after %s s", len(left), grace)
    for turn in left:
        turn.interrupt()
    await _settled((turn.task for turn in left), until=end)


async def _settled(futures: Iterable[asyncio.Future], *, until: float) -> None:
    """Wait for the futures until the loop's time `until` (or not at all, if none)."""
    waited = list(futures)
    if waited:
        await asyncio.wait(waited, timeout=max(0.0, until - asyncio.get_running_loop().time()))
