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
import contextlib
import weakref

from django.conf import settings

from roject.server.draining import draining
from rojos.errors import ServerDraining

__all__ = ["StartSlot", "new_turns_taken", "start_admit", "starts_settled"]


class _Gate:
    """ROJO_START_CONCURRENCY places, and whether any start holds or waits for one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.semaphore = asyncio.Semaphore(size)
        self.busy = 0  # starts holding or waiting for a place
        self.settled = asyncio.Event()  # set while busy is 0
        self.settled.set()

    def enter(self) -> None:
        self.busy += 1
        self.settled.clear()

    def leave(self) -> None:
        self.busy -= 1
        if not self.busy:
            self.settled.set()


class StartSlot:
    """One admitted start: its place among ROJO_START_CONCURRENCY, given back once."""

    def __init__(self, gate: _Gate, hold: float) -> None:
        self._gate = gate
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
            self._gate.semaphore.release()
            self._gate.leave()


# One gate per event loop (asyncio's primitives belong to the loop that first waits), with
# the size it was made for: a changed setting takes effect with the next start.
_gates: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate]" = weakref.WeakKeyDictionary()


def new_turns_taken() -> None:
    """ServerDraining while this process shuts down (roject/server/graceful.py): it takes no
    new turns, and a start it would refuse waits for no place first."""
    if draining():
        raise ServerDraining("This server is restarting; send the message again in a moment.")


async def start_admit() -> StartSlot:
    """Wait for a place among the starts under way (first come, first admitted);
    ServerDraining at once while the process shuts down."""
    new_turns_taken()
    loop = asyncio.get_running_loop()
    size = max(1, settings.ROJO_START_CONCURRENCY)
    gate = _gates.get(loop)
    if gate is None or gate.size != size:
        gate = _gates[loop] = _Gate(size)
    gate.enter()
    try:
        await gate.semaphore.acquire()
    except BaseException:
        gate.leave()
        raise
    return StartSlot(gate, settings.ROJO_START_HOLD_SECONDS)


async def starts_settled() -> None:
    """Wait until no start on this process holds or waits for a place, at most
    ROJO_END_YIELD_SECONDS: a turn's writes at the end of a step let the starts go first.

    With 200 chats sent at once, the replies that end meanwhile (their message, usage and
    turn records, on the database threads and the one core for Python) took CPU from the
    starts still queued: each reply's text was streamed, only its storing waits, and the
    bound keeps a reply from waiting on a process that is never free of starts
    (docs/performance.md, section 10).
    """
    gate = _gates.get(asyncio.get_running_loop())
    if gate is None or gate.settled.is_set() or draining():  # a drain wants the turns done
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(settings.ROJO_END_YIELD_SECONDS):
            await gate.settled.wait()
