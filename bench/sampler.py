"""A small CPU-sampling profiler for the server process, for finding where a figure goes.

SIGPROF fires every millisecond of the process's CPU time. Each sample goes to the thread
whose CPU clock moved most since the last one (the event loop's, or a database thread's),
as that thread's stack, its root named for the thread: the ORM's work on the database
threads shows where it is, not as the loop sitting in select(). Unlike cProfile it adds no
cost per call, so the shares are those of an unprofiled run. Its limits: signals that come
while another thread holds the CPU coalesce (most samples of a start's work on the database
threads are lost), and asyncio's wake-up descriptor turns each signal into a wake-up of the
loop, counted as select() and _write_to_self; `py-spy record --gil` has neither.
"""

import collections
import signal
import sys
import threading
import time
from pathlib import Path

_stacks: collections.Counter = collections.Counter()
_cpu: dict[int, float] = {}  # each thread's CPU clock at the last sample


def _thread_cpu(ident: int) -> float:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ProcessLookupError):
        return 0.0


def _busiest(frames: dict) -> int:
    """The thread that used the most CPU since the last sample."""
    best, most = threading.main_thread().ident, -1.0
    for ident in frames:
        now = _thread_cpu(ident)
        moved, _cpu[ident] = now - _cpu.get(ident, now), now
        if moved > most:
            best, most = ident, moved
    return best


def _sample(signum, frame) -> None:
    frames = sys._current_frames()
    ident = _busiest(frames)
    if ident != threading.main_thread().ident:
        frame = frames.get(ident, frame)
    thread = threading._active.get(ident)
    names = []
    while frame is not None:
        code = frame.f_code
        names.append(f"{Path(code.co_filename).name}:{code.co_name}")
        frame = frame.f_back
    names.append(f"[{(thread.name if thread else 'thread').rstrip('0123456789-')}]")
    _stacks[tuple(reversed(names))] += 1


def reset() -> int:
    """Drop what was sampled so far (the start-up, its imports, a warm-up), so the profile
    covers what a figure measures; the samples dropped."""
    dropped = sum(_stacks.values())
    _stacks.clear()
    return dropped


def start(interval: float = 0.001) -> None:
    signal.signal(signal.SIGPROF, _sample)
    signal.setitimer(signal.ITIMER_PROF, interval, interval)


def stop_and_write(path: str) -> None:
    """Write the top functions by own and by total samples, then the collapsed stacks."""
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    total = sum(_stacks.values()) or 1
    own: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    for stack, count in _stacks.items():
        own[stack[-1]] += count
        for name in set(stack):
            inclusive[name] += count
    lines = [f"{total} samples"]
    for title, counter in (("own", own), ("inclusive", inclusive)):
        lines.append(f"\n# by {title}")
        lines += [f"{n / total:6.1%}  {name}" for name, n in counter.most_common(60)]
    lines.append("\n# collapsed stacks")
    lines += [f"{';'.join(stack)} {n}" for stack, n in _stacks.most_common()]
    Path(path).write_text("\n".join(lines) + "\n")
