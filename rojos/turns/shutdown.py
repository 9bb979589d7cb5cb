"""A process's turns when it shuts down (roject/server/graceful.py calls `turns_drain`): the
running ones may finish within the grace period; the rest end as interrupted, their text
kept and their followers told, never killed mid-write.

An interrupted turn ends as a Stop does (its task cancelled, its calls answered, its record
written, its conversation given up), with the INTERRUPTED status and a message saying why.
"""

import asyncio
import logging

from .log import Turn
from .registry import turns_running

logger = logging.getLogger(__name__)

# How long the interrupted turns get to record their end (their last writes).
END_SECONDS = 20


async def turns_drain(*, grace: float) -> None:
    """Wait up to `grace` seconds for this process's running turns, then interrupt the rest
    and wait for them to record their end."""
    running: list[Turn] = turns_running()
    if not running:
        return
    logger.info("waiting for %d running turns (up to %s s)", len(running), grace)
    tasks = [turn.task for turn in running]
    await asyncio.wait(tasks, timeout=grace)
    left = [turn for turn in running if not turn.finished]
    if not left:
        return
    logger.warning("interrupting %d turns still running after %s s", len(left), grace)
    for turn in left:
        turn.interrupt()
    await asyncio.wait([turn.task for turn in left], timeout=END_SECONDS)
