"""A small CPU-sampling profiler for the server process, for finding where a figure goes.

SIGPROF fires every millisecond of the process's CPU time and records the main thread's
stack (the event loop's, where each chunk and event is handled). Samples taken while the
loop sits in select() are CPU spent by other threads (the ORM's, the tools'). Unlike
cProfile it adds no cost per call, so the shares are those of an unprofiled run.
"""

import collections
import signal
from pathlib import Path

_stacks: collections.Counter = collections.Counter()


def _sample(signum, frame) -> None:
    names = []
    while frame is not None:
        code = frame.f_code
        names.append(f"{Path(code.co_filename).name}:{code.co_name}")
        frame = frame.f_back
    _stacks[tuple(reversed(names))] += 1


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
