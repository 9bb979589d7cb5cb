"""The app served in a process of its own, as in production, with one extra route for its usage.

`python -m bench.server` serves roject.asgi:application with uvicorn and httptools, as in
production (BENCH_SERVER=daphne: with daphne; uvicorn-h11, uvicorn-uvloop, uvicorn-uvloop-h11:
uvicorn on that loop and parser) on a free port of 127.0.0.1 and prints the port. GET
/__bench__/usage answers the process's CPU time in ns (all threads, those that ended
included), which /proc's 10 ms ticks could not resolve per turn, and how long each of its
garbage-collector passes stopped it (generation, ms). With BENCH_TRACEMALLOC=<frames>, GET
/__bench__/memory answers how the Python heap grew since the last such call, by place
(tracemalloc). GET /__bench__/heap answers, cheaply enough to poll, what SQLite's allocator
holds now and at most (all connections: page caches, statements, full-text buffers) and
Python's allocated blocks. With BENCH_COUNT_CROSSINGS=1, GET /__bench__/crossings answers
the calls handed to the database threads since the last such call (roject/server/db_threads.py
lanes), by function. With BENCH_PROFILE, GET /__bench__/profile-reset drops what the
sampler (bench/sampler.py) took so far.
"""

import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

USAGE_PATH = "/__bench__/usage"
MEMORY_PATH = "/__bench__/memory"
TRIM_PATH = "/__bench__/trim"
HEAP_PATH = "/__bench__/heap"
CROSSINGS_PATH = "/__bench__/crossings"
PROFILE_RESET_PATH = "/__bench__/profile-reset"
CALLGRIND_PATH = "/__bench__/callgrind"  # ?start, ?zero, ?dump-<label>: bench/callgrind.py
CALLS_PATH = "/__bench__/calls"  # ?zero, ?take: the event loop's calls, by function

_snapshots: list = []  # tracemalloc's, one per call of MEMORY_PATH


def _memory_diff() -> dict:
    """With BENCH_TRACEMALLOC=<frames>: what Python allocated since the last call, by place.

    The first call only takes the baseline. Each answer lists the 25 places (tracebacks,
    innermost last) whose allocations grew most, how much all places grew together, the
    traced total, and the gc's objects.
    """
    import tracemalloc

    if not tracemalloc.is_tracing():
        return {"error": "start the server with BENCH_TRACEMALLOC=<frames>"}
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    grown, grown_kib = [], 0.0
    if _snapshots:
        stats = snapshot.compare_to(_snapshots[-1], "traceback")
        grown_kib = sum(stat.size_diff for stat in stats) / 1024  # every place, not the top
        for stat in stats[:25]:
            frames = [f"{f.filename}:{f.lineno}" for f in stat.traceback]
            grown.append({"kib": stat.size_diff / 1024, "count": stat.count_diff, "at": frames})
    _snapshots[:] = [snapshot]
    traced, peak = tracemalloc.get_traced_memory()
    return {"traced_kib": traced / 1024, "peak_kib": peak / 1024, "objects": len(gc.get_objects()),
            "grown": grown, "grown_kib": grown_kib}  # fmt: skip


def _trim() -> dict:
    """Hand the allocator's free memory back to the system (glibc's malloc_trim): how much
    RSS that frees tells memory held from memory kept after it was freed."""
    import ctypes

    def rss_kib() -> int:
        status = Path("/proc/self/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0])

    before, started = rss_kib(), time.perf_counter()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    took_ms = (time.perf_counter() - started) * 1000
    return {"before_kib": before, "after_kib": rss_kib(), "took_ms": took_ms}


def _heap() -> dict:
    """SQLite's own heap (sqlite3_memory_used and its high-water mark) and how many blocks
    Python has allocated: where RSS above the live objects may be held."""
    import _sqlite3
    import ctypes
    import sys

    lib = ctypes.CDLL(_sqlite3.__file__)
    used, high = lib.sqlite3_memory_used, lib.sqlite3_memory_highwater
    used.restype = high.restype = ctypes.c_int64
    return {
        "sqlite_kib": used() / 1024,
        "sqlite_peak_kib": high(0) / 1024,
        "python_blocks": sys.getallocatedblocks(),
    }


_crossings: dict[str, int] = {}


def _crossings_count() -> None:
    """Count every call a lane hands to the database threads, by the function it runs
    (asgiref's thread handler carries it as the `child` partial)."""
    from roject.server.db_threads import _Lane

    submit = _Lane.submit

    def counted(self, fn, /, *args, **kwargs):
        child = fn.args[-1] if getattr(fn, "args", None) else fn
        target = getattr(child, "func", child)
        name = getattr(target, "__qualname__", type(target).__qualname__)
        _crossings[name] = _crossings.get(name, 0) + 1
        return submit(self, fn, *args, **kwargs)

    _Lane.submit = counted


def _crossings_taken() -> dict:
    taken = dict(sorted(_crossings.items(), key=lambda item: -item[1]))
    _crossings.clear()
    return {"total": sum(taken.values()), "calls": taken}


_profiles: list = []  # the profiler counting the loop's calls since CALLS_PATH?zero


def _calls(action: str) -> dict:
    """Count the event loop thread's calls by function (cProfile, on its own CPU time) from ?zero;
    ?take stops and answers them: {"path:line(function)": [calls, own s, with callees s]}."""
    import cProfile
    import pstats

    profile = _profiles.pop() if _profiles else None
    if profile is not None:
        profile.disable()
    if action == "zero":
        profile = cProfile.Profile(time.thread_time)  # the loop thread's own CPU
        _profiles.append(profile)
        profile.enable()
        return {"done": action}
    if action != "take" or profile is None:
        return {"error": f"{action!r}: ?zero, then ?take"}
    return {
        f"{path}:{line}({name})": [calls, own, total]
        for (path, line, name), (_, calls, own, total, _) in pstats.Stats(profile).stats.items()
    }


_gc_pauses: list[tuple[int, float]] = []
_gc_started = 0.0


def _gc_timer(phase: str, info: dict) -> None:
    """Keep how long each collector pass stopped the process, with its generation."""
    global _gc_started
    if phase == "start":
        _gc_started = time.perf_counter()
    else:
        _gc_pauses.append((info["generation"], (time.perf_counter() - _gc_started) * 1000))


def _application():
    from roject.asgi import application as app

    gc.callbacks.append(_gc_timer)
    if os.environ.get("BENCH_COUNT_CROSSINGS"):
        _crossings_count()
    paths = (USAGE_PATH, MEMORY_PATH, TRIM_PATH, CROSSINGS_PATH, HEAP_PATH, PROFILE_RESET_PATH,
             CALLGRIND_PATH, CALLS_PATH)  # fmt: skip

    async def application(scope, receive, send):
        if scope["type"] == "http" and scope["path"] in paths:
            if scope["path"] == MEMORY_PATH:
                usage = _memory_diff()
            elif scope["path"] == CROSSINGS_PATH:
                usage = _crossings_taken()
            elif scope["path"] == TRIM_PATH:
                usage = _trim()
            elif scope["path"] == HEAP_PATH:
                usage = _heap()
            elif scope["path"] == PROFILE_RESET_PATH:
                from . import sampler

                usage = {"samples_dropped": sampler.reset()}
            elif scope["path"] == CALLGRIND_PATH:
                from . import callgrind

                usage = callgrind.control(scope["query_string"].decode())
            elif scope["path"] == CALLS_PATH:
                usage = _calls(scope["query_string"].decode())
            else:
                usage = {"cpu_ns": time.process_time_ns(), "gc_pauses": _gc_pauses}
            body = json.dumps(usage).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return application


# BENCH_SERVER's uvicorn variants: (event loop, HTTP parser). `uvicorn` is the production
# command's (docs/operations.md, "Running at scale"); uvloop (not a dependency) was measured slower.
UVICORN = {
    "uvicorn": ("asyncio", "httptools"),
    "uvicorn-h11": ("asyncio", "h11"),
    "uvicorn-uvloop": ("uvloop", "httptools"),
    "uvicorn-uvloop-h11": ("uvloop", "h11"),
}


def _serve_uvicorn(sock: socket.socket, variant: str) -> None:
    import uvicorn

    from roject.server.exit_wake import ExitWokenServer

    loop, http = UVICORN[variant]
    config = uvicorn.Config(
        _application(), log_level="warning", lifespan="off", loop=loop, http=http,
        access_log=False,
    )  # fmt: skip
    server = ExitWokenServer(config)  # the production server's tick, once a second
    # uvicorn re-raises the SIGINT it was stopped with, once it has shut down.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])


def _serve_daphne(sock: socket.socket) -> None:
    """daphne on the same port, as `daphne roject.asgi:application` serves."""
    from daphne.server import Server as Daphne  # installs Twisted's asyncio reactor first

    # Twisted's asyncio reactor cannot adopt the socket: daphne binds its port again.
    port = sock.getsockname()[1]
    sock.close()
    endpoint = f"tcp:port={port}:interface=127.0.0.1:backlog=2048"
    Daphne(_application(), endpoints=[endpoint], verbosity=0, action_logger=None).run()


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(sock.getsockname()[1], flush=True)
    if os.environ.get("BENCH_TRACEMALLOC"):
        import tracemalloc

        tracemalloc.start(int(os.environ["BENCH_TRACEMALLOC"]))
    profile_to = os.environ.get("BENCH_PROFILE")
    if profile_to:
        from . import sampler

        sampler.start()
    try:
        variant = os.environ.get("BENCH_SERVER") or "uvicorn"
        if variant == "daphne":
            _serve_daphne(sock)
        else:
            _serve_uvicorn(sock, variant)
    finally:
        if profile_to:
            sampler.stop_and_write(f"{profile_to}.{os.getpid()}")


@dataclass
class Server:
    """A running server process: where it listens, and how to read its usage."""

    process: subprocess.Popen
    host: str
    port: int

    def _get(self, path: str, *, timeout: float) -> dict:
        """One of the bench's routes of the server, its JSON answer."""
        url = f"http://{self.host}:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)

    def usage(self) -> dict:
        """The server's CPU time so far (ns), and its collector's pauses."""
        return self._get(USAGE_PATH, timeout=30)

    def memory_diff(self) -> dict:
        """What the server's Python allocations grew by since the last call (tracemalloc)."""
        return self._get(MEMORY_PATH, timeout=120)

    def trim(self) -> dict:
        """The server's RSS (KiB) before and after it handed its free memory back (_trim)."""
        return self._get(TRIM_PATH, timeout=30)

    def heap(self) -> dict:
        """SQLite's heap and Python's allocated blocks in the server (_heap)."""
        return self._get(HEAP_PATH, timeout=30)

    def crossings(self) -> dict:
        """The calls handed to the database threads since the last call (by function)."""
        return self._get(CROSSINGS_PATH, timeout=30)

    def profile_reset(self) -> None:
        """With BENCH_PROFILE, drop what the sampler took so far (start-up, a warm-up)."""
        if os.environ.get("BENCH_PROFILE"):
            self._get(PROFILE_RESET_PATH, timeout=30)

    def cpu_ns(self) -> int:
        return self.usage()["cpu_ns"]

    def memory_kib(self) -> dict[str, int]:
        """VmRSS (now) and VmHWM (peak) of the server process, in KiB."""
        fields = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
        return fields

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def server_start(
    env: dict[str, str], log: Path, tree: Path | None = None, *, wrapper: list[str] = ()
) -> Server:
    """Start `python -m bench.server`, its output going to `log`, and wait until it answers.

    With `tree`, the app and the bench server of that checkout (a baseline to compare with).
    With `wrapper`, the command that runs it (valgrind's: bench/callgrind.py), which may
    take minutes to start it.
    """
    tree_env = {"PYTHONPATH": str(tree)} if tree else {}
    with log.open("a") as log_file:
        process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "bench.server"],
            cwd=tree,
            env={**os.environ, **env, **tree_env},
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )
    port = int(process.stdout.readline())
    server = Server(process=process, host="127.0.0.1", port=port)
    # A loaded machine, or tracemalloc, starts it slowly; valgrind much more so.
    deadline = time.monotonic() + (900 if wrapper else 90)
    while True:
        try:
            server.cpu_ns()
            return server
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                server.stop()
                raise RuntimeError(f"the bench server did not start; see {log}") from None
            time.sleep(0.05)


if __name__ == "__main__":
    main()
