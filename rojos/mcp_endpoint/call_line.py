"""This process's MCP calls of one token in one project, taking turns, first come, first
served: only the first in line asks the database whether the conversation is free (./calls.py).
Waiting calls that each asked twenty times a second took the database from the running one."""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .caller import McpCaller

logger = logging.getLogger(__name__)


@dataclass
class _Line:
    """This process's calls of one token in one project (and event loop), taking turns."""

    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    calls: int = 0


_lines: dict[tuple, _Line] = {}


@contextlib.asynccontextmanager
async def call_line(caller: McpCaller, deadline: float) -> AsyncIterator[bool]:
    """Wait for this process's earlier calls of the token in the project, until `deadline`;
    yields whether this call's turn came (held until the call ends)."""
    key = (asyncio.get_running_loop(), caller.token_id, caller.project_id)
    line = _lines.setdefault(key, _Line())
    line.calls += 1
    try:
        try:
            if line.turn.locked():
                logger.debug("an MCP call of token %s waits for the one before it", caller.token_id)
            async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                await line.turn.acquire()
        except TimeoutError:
            yield False
            return
        try:
            yield True
        finally:
            line.turn.release()
    finally:
        line.calls -= 1
        if not line.calls:
            del _lines[key]
