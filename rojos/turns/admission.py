"""Turn starts admitted a few at a time, in the order they came.

A start is CPU on the process's one event loop (the request's checks, the claim, the
history, the provider request) until its provider request is sent. When 200 start at
once, every start shares the loop with every other: all of them finish late together,
and the streams already running wait behind them. Admitted a few at a time, in order, the
first starts reach their provider at once, the rest in turn, and a running stream's
chunks wait behind a few starts, not all of them (docs/performance.md, section 10).

A slot is taken by the chat request before its checks and given back once, by whichever
comes first: the turn sending its first provider request (`admitted`, called by
rojos.provider.stream: rojos.provider.admission), the turn ending, the request answered
without a turn, or the slot held ROJO_START_HOLD_SECONDS (a start waiting on a locked
database or on an MCP server's start must not hold up the others for long).
"""

import asyncio
import weakref

from django.conf import settings

__all__ = ["StartSlot", "start_admit"]


class StartSlot:
    """One admitted start: its place among ROJO_START_CONCURRENCY, given back once."""

    def __init__(self, semaphore: asyncio.Semaphore, hold: float) -> None:
        self._semaphore = semaphore
        self._timer = asyncio.get_running_loop().call_later(hold, self.release)
        self.released = False
        self.handed = False  # to a turn's task, which gives it back

    def release_unless_handed(self) -> None:
        """The start failed or was cancelled: give the place back, unless a turn has it."""
        if not self.handed:
            self.release()

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._timer.cancel()
            self._semaphore.release()


# One semaphore per event loop (asyncio's primitives belong to the loop that first waits),
# with the size it was made for: a changed setting takes effect with the next start.
_gates: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, asyncio.Semaphore]]" = (
    weakref.WeakKeyDictionary()
)


async def start_admit() -> StartSlot:
    """Wait for a place among the starts under way (first come, first admitted)."""
    loop = asyncio.get_running_loop()
    size = max(1, settings.ROJO_START_CONCURRENCY)
    made, gate = _gates.get(loop, (None, None))
    if made != size or gate is None:
        gate = asyncio.Semaphore(size)
        _gates[loop] = (size, gate)
    await gate.acquire()
    return StartSlot(gate, settings.ROJO_START_HOLD_SECONDS)
