"""Handing the memory that finished work freed back to the system while turns run.

glibc's allocator keeps what a process frees for reuse, and returns to the system only the
top of its heap. A turn's start frees hundreds of KiB scattered through the heap (its
request's SQLite connection, the ORM's rows, the request's objects), so under a burst of
starts the RSS grows with everything freed, not with what is held: at 200 streams, about
twice what the streams hold (docs/performance.md, "Memory per stream"). While any turn runs,
a thread of the process calls malloc_trim every ROJO_MALLOC_TRIM_SECONDS, and once more
after the last turn ends; where there is no glibc it does nothing.

glibc also moves its threshold for serving an allocation from a mapping of its own: each
time a mapped block is freed, blocks up to that size come from the heap from then on. A
long reply's text, joined for each draft and at the end, and the database's copies of it,
then land in the heap, where what they free stays until the next trim: ten replies of 0.8
MB ending together held 20 MiB more at their peak than with the threshold fixed
(docs/performance.md, section 8). `malloc_tune` fixes it at ROJO_MALLOC_MMAP_KIB at start-up.

And glibc gives threads arenas of their own, up to eight per core: each database thread's
SQLite then frees into a heap of its own, whose free memory other threads cannot reuse.
`malloc_tune` caps them at ROJO_MALLOC_ARENAS (2: ten slow clients' peak fell from 36 to
20 MiB above idle under daphne; the loop's CPU per conversation, bench section 1 in two
pairs, glibc's arenas then two: 71.6 then 73.9 ms, 64.9 then 57.0 ms, within the noise).
"""

import contextlib
import ctypes
import functools
import os
import threading
import time
from collections.abc import Iterator

from django.conf import settings

_lock = threading.Lock()
_wake = threading.Condition(_lock)
_running = 0
_trimmer: threading.Thread | None = None
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
_M_ARENA_MAX = -8


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None (musl, macOS: nothing to call)."""
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL("libc.so.6").malloc_trim
    return None


def malloc_tune() -> None:
    """Fix glibc's threshold for mapped blocks at ROJO_MALLOC_MMAP_KIB and cap its arenas
    at ROJO_MALLOC_ARENAS (0: glibc's own), unless the environment set them already
    (MALLOC_MMAP_THRESHOLD_, MALLOC_ARENA_MAX). Called at start-up, before the database
    threads: an arena cap applies to arenas made after it."""
    tunes = (
        (_M_MMAP_THRESHOLD, settings.ROJO_MALLOC_MMAP_KIB * 1024, "MALLOC_MMAP_THRESHOLD_"),
        (_M_ARENA_MAX, settings.ROJO_MALLOC_ARENAS, "MALLOC_ARENA_MAX"),
    )
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        for option, value, variable in tunes:
            if value > 0 and variable not in os.environ:
                libc.mallopt(option, value)


def _trim_while_running() -> None:
    """Trim every ROJO_MALLOC_TRIM_SECONDS while a turn runs, then once after the last one
    ended. malloc_trim runs outside the GIL (a ctypes call): the event loop's thread goes on.
    """
    global _running
    while True:
        with _lock:
            while _running == 0:
                _wake.wait()
            # The trim after the last turn's end is one that starts after it: a trim under
            # way as it ended may have run before that turn freed its memory.
            final = _running < 0
        time.sleep(settings.ROJO_MALLOC_TRIM_SECONDS)
        _malloc_trim()(0)
        with _lock:
            if final and _running < 0:  # the process's last turn ended: the final trim is done
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
