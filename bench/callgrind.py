"""Instruction counts of a server process, taken by valgrind's callgrind: whatever else runs.

CPU time per chunk moves with the machine's load (another job's cache misses, its turn on
the cores); the instructions a process executes do not. A server started under
`valgrind_command()` runs with callgrind's instrumentation off (a few times slower, not a
hundred), until the bench's route (bench.server's CALLGRIND_PATH) asks it to count: ?start
turns it on, ?zero clears the counts (after a full collection), ?dump-<label> writes them to
a file, whose total `dumped_total` reads.
The route calls valgrind's client requests through a small C library compiled at the
start of a run (`control_library`), so each count begins and ends at a known point of the
server's own code, not when an outside tool gets to it. User-space instructions only: the
kernel's share of a write is not in them.
"""

import ctypes
import gc
import os
import shutil
import subprocess
import time
from pathlib import Path

LIBRARY_ENV = "BENCH_CALLGRIND_LIB"

_SOURCE = r"""
#include <valgrind/callgrind.h>
int cg_running(void) { return RUNNING_ON_VALGRIND; }
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""


def missing() -> str | None:
    """Why instructions cannot be counted here (no valgrind, no C compiler or its header),
    or None."""
    for tool in ("valgrind", "cc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/usr/include/valgrind/callgrind.h").exists():
        return "valgrind's headers (valgrind/callgrind.h) are not installed"
    return None


def control_library(directory: Path) -> Path:
    """Compile the client requests' library into `directory`; its path."""
    source, library = directory / "callgrind_control.c", directory / "callgrind_control.so"
    source.write_text(_SOURCE)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def valgrind_command(out_dir: Path) -> list[str]:
    """The prefix that runs a server under callgrind, counting nothing until told."""
    return [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
        "--dump-line=no", f"--callgrind-out-file={out_dir}/callgrind.%p", "--log-fd=2",
        "--quiet",
        # BENCH_CALLGRIND_LOOP_ONLY: a count per thread, and a dump (asked for on the event
        # loop) then holds the event loop's thread alone, not the database threads'.
        *(["--separate-threads=yes"] if os.environ.get("BENCH_CALLGRIND_LOOP_ONLY") else []),
    ]  # fmt: skip


_library = None


def control(action: str) -> dict:
    """In the server (its route): start counting, zero the counts, or dump them."""
    global _library
    if _library is None:
        path = os.environ.get(LIBRARY_ENV)
        if not path:
            return {"error": f"start the server with {LIBRARY_ENV} and under valgrind"}
        _library = ctypes.CDLL(path)
    if not _library.cg_running():
        return {"error": "not running under valgrind"}
    if action == "start":
        _library.cg_start()
    elif action == "zero":
        # Each count starts at the same point of the collector's cycle: one whose count
        # included a collection of the older generations had millions more than one without.
        gc.collect()
        _library.cg_zero()
    elif action.startswith("dump-"):
        _library.cg_dump(action.encode())
    else:
        return {"error": f"unknown action {action!r}"}
    return {"done": action}


def dumped_total(out_dir: Path, pid: int, label: str) -> int:
    """The instructions counted in the dump written with `label`: the sum of its functions'
    own counts. (Its `summary` line ran up to 40% over that sum in some counts of the app,
    by a varying amount, with the same functions and calls in them.)"""
    for dump in out_dir.glob(f"callgrind.{pid}[.-]*"):
        text = dump.read_text(errors="replace")
        if f"\ndesc: Trigger: Client Request: {label}\n" in text:
            return _own_costs(text)
    raise RuntimeError(f"no callgrind dump {label!r} of process {pid} in {out_dir}")


def _own_costs(text: str) -> int:
    """The sum of a dump's cost lines, but those giving a call's inclusive cost."""
    total, after_call = 0, False
    for line in text.splitlines():
        if line.startswith("calls="):
            after_call = True
        elif line[:1].isdigit() or line[:1] in ("+", "-", "*"):
            if after_call:
                after_call = False
            else:
                total += int(line.split()[1])
    return total


def _threads_state(pid: int) -> tuple[bool, int]:
    """Whether every thread of `pid` sleeps, and their CPU ticks together."""
    asleep, ticks = True, 0
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        asleep = asleep and fields[0] in ("S", "D", "I")
        ticks += int(fields[11]) + int(fields[12])
    return asleep, ticks


def wait_idle(pid: int, *, quiet: int = 3, every: float = 0.2, timeout: float = 600) -> None:
    """Return once the process has slept at `quiet` looks in a row, `every` seconds apart
    (read from /proc, so the waiting adds no instructions to the server's count)."""
    deadline, calm = time.monotonic() + timeout, 0
    _, ticks = _threads_state(pid)
    while calm < quiet:
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} did not go idle within {timeout:g} s")
        time.sleep(every)
        asleep, now = _threads_state(pid)
        calm = calm + 1 if asleep and now - ticks <= 1 else 0
        ticks = now
