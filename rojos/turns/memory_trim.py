"""Handing the memory that finished work freed back to the system while turns run.

glibc's allocator keeps what a process frees for reuse, and returns to the system only the
top of its heap. A turn's start frees hundreds of KiB scattered through the heap (its
request's SQLite connection, the ORM's rows, the request's objects), so under a burst of
starts the RSS grows with everything freed, not with what is held: at 200 streams, about
twice what the streams hold (docs/performance.md, "Memory per stream"). So a turn's start
and its end each ask a thread of the process for a malloc_trim ROJO_MALLOC_TRIM_SECONDS
later; what is asked meanwhile comes with that trim, and with one more an interval after
it. A burst is trimmed once an interval, as long as starts and ends go on; a turn that
streams on alone is not trimmed while it streams, for its chunks free nothing the heap does
not reuse. Before (a trim every interval while any turn ran), a lone reply of 500 chunks
20 ms apart was trimmed ten times: about 45 context switches more (878 against 833, `perf
stat` on the server) and 150 page faults more (the trimmed pages faulted back in), each
costly on a virtual machine (docs/performance.md, section 10). Where there is no glibc it
does nothing.

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
_due: float | None = None  # when the trim asked for is made (time.monotonic); None: none
_again = False  # asked for again after `_due` was set: one more trim after that one
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


def _trim_when_asked() -> None:
    """Trim when one is due; then, if more was asked meanwhile, again an interval later.
    malloc_trim runs outside the GIL (a ctypes call): the event loop's thread goes on."""
    global _due, _again
    while True:
        with _lock:
            while _due is None:
                _wake.wait()
            due = _due
        time.sleep(max(0.0, due - time.monotonic()))
        with _lock:
            # What was asked after `due` was set may not be freed yet: it gets the next one.
            _due = time.monotonic() + settings.ROJO_MALLOC_TRIM_SECONDS if _again else None
            _again = False
        _malloc_trim()(0)


def trim_soon() -> None:
    """Ask for the freed memory to go back to the system ROJO_MALLOC_TRIM_SECONDS from now
    (with the trim already asked for, and one more after it)."""
    global _due, _again, _trimmer
    seconds = settings.ROJO_MALLOC_TRIM_SECONDS
    if seconds <= 0 or _malloc_trim() is None:
        return
    with _lock:
        if _due is not None:
            _again = True
            return
        _due = time.monotonic() + seconds
        if _trimmer is None:
            _trimmer = threading.Thread(target=_trim_when_asked, name="trim", daemon=True)
            _trimmer.start()
        _wake.notify()


@contextlib.contextmanager
def memory_trimmed() -> Iterator[None]:
    """A turn: what its start frees, and what its end frees, goes back to the system."""
    trim_soon()
    try:
        yield
    finally:
        trim_soon()
