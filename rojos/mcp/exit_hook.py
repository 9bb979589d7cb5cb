"""The last resort: stdio servers still running when this process exits are stopped.

Sessions stop their servers when they end (the SDK closes stdin, then terminates the
process group). A process that exits without ending them (a server stopped by a signal,
a loop never closed) ends them here: each server runs in its own process group.
"""

import atexit
import contextlib
import os
import signal

_running: set[int] = set()


def track(pid: int | None) -> None:
    if pid is not None:
        _running.add(pid)


def untrack(pid: int | None) -> None:
    _running.discard(pid)


def running() -> frozenset[int]:
    return frozenset(_running)


@atexit.register
def _stop_all() -> None:
    for pid in list(_running):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)
