"""The last resort: stdio servers still running when this process exits are stopped.

Sessions stop their servers when they end (the SDK closes stdin, then terminates the
process group). A process that exits without ending them (a server stopped by a signal,
a loop never closed) ends them here: each server runs in its own process group.
"""

import atexit
import contextlib
import os
import signal
import time

_running: set[int] = set()


def track(pid: int | None) -> None:
    if pid is not None:
        _running.add(pid)


def untrack(pid: int | None) -> None:
    _running.discard(pid)


def running() -> frozenset[int]:
    return frozenset(_running)


def _signal_all(pids: list[int], sig: int) -> list[int]:
    """Send `sig` to each group; the ids of those still there."""
    left = []
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, sig)
            left.append(pid)
    return left


@atexit.register
def _stop_all() -> None:
    left = _signal_all(list(_running), signal.SIGTERM)
    deadline = time.monotonic() + 1.0
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _signal_all(left, 0)  # signal 0: only whether it is still there
    _signal_all(left, signal.SIGKILL)
