"""Handing the memory that finished work freed back to the system while turns run.

glibc's allocator keeps what a process frees for reuse, and returns to the system only the
top of its heap. A turn's start frees hundreds of KiB scattered through the heap (its
request's SQLite connection, the ORM's rows, the request's objects), so under a burst of
starts the RSS grows with everything freed, not with what is held: at 200 streams, about
twice what the streams hold (docs/performance.md, "Memory per stream"). While any turn runs,
a thread of the process calls malloc_trim every ROJO_MALLOC_TRIM_SECONDS, and once more
after the last turn ends; where there is no glibc it does nothing.
"""

import contextlib
import ctypes
import functools
import threading
import time
from collections.abc import Iterator

from django.conf import settings

_lock = threading.Lock()
_wake = threading.Condition(_lock)
_running = 0
_trimmer: threading.Thread | None = None


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None (musl, macOS: nothing to call)."""
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL("libc.so.6").malloc_trim
    return None


def _trim_while_running() -> None:
    """Trim every ROJO_MALLOC_TRIM_SECONDS while a turn runs, then once after the last one
    ended. malloc_trim runs outside the GIL (a ctypes call): the event loop's thread goes on.
    """
    global _running
    while True:
        with _lock:
            while _running == 0:
                _wake.wait()
        time.sleep(settings.ROJO_MALLOC_TRIM_SECONDS)
        _malloc_trim()(0)
        with _lock:
            if _running < 0:  # the process's last turn ended: the final trim is done
                _running = 0


@contextlib.contextmanager
def memory_trimmed() -> Iterator[None]:
    """Keep the process's freed memory trimmed for as long as the block (a turn) runs."""
    global _running, _trimmer
    if settings.ROJO_MALLOC_TRIM_SECONDS <= 0 or _malloc_trim() is None:
        yield
        return
    with _lock:
        _running = max(_running, 0) + 1
        if _trimmer is None:
            _trimmer = threading.Thread(target=_trim_while_running, name="trim", daemon=True)
            _trimmer.start()
        _wake.notify()
    try:
        yield
    finally:
        with _lock:
            # -1: none runs, one more trim due (for what the last turn freed)
            _running = _running - 1 if _running > 1 else -1
