"""uvicorn's server, woken by its exit instead of looking for it ten times a second.

uvicorn's main loop sleeps 0.1 s, looks whether a signal asked it to stop, and once in ten
rounds sets the Date header. Each round wakes the process: on the virtual machines measured
(docs/performance.md, section 10) about 0.2 ms of CPU a wake-up, 2 ms a second for a server
with nothing to do; a reply of 500 chunks 20 ms apart wakes the process 500 times for its
chunks, and 100 more for the ticks. Here the loop
wakes once a second for the Date header, and at once when `should_exit` is set: by a signal,
by the graceful drain (roject/server/graceful.py), or from another thread.
"""

import asyncio
import contextlib

import uvicorn

# The Date header's resolution, which is all the tick is still for.
TICK_SECONDS = 1.0


class ExitWokenServer(uvicorn.Server):
    """uvicorn's server whose main loop sleeps until its exit or the next second."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit_wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        # Set from a signal handler, the loop, or another thread: the wake-up goes through
        # the loop's own thread-safe door, and a loop already closed has nothing to wake.
        self._should_exit = value
        if value and (wake := self._exit_wake) is not None:
            loop, exiting = wake
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(exiting.set)

    async def main_loop(self) -> None:
        exiting = asyncio.Event()
        self._exit_wake = (asyncio.get_running_loop(), exiting)
        try:
            # A counter of 0 makes every tick set the Date header, uvicorn's once a second.
            while not await self.on_tick(0):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TICK_SECONDS):
                        await exiting.wait()
        finally:
            self._exit_wake = None
