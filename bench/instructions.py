"""Instructions per streamed chunk, the app beside the floor: counted, so any load will do.

`python -m bench.instructions [--window 200] [--rounds 3]` runs the app's server and the
floor relay (bench/floor.py) under callgrind (bench/callgrind.py) and streams one reply at a
time through each, in lockstep: the provider sends a chunk only once the client has
received the one before, so every chunk crosses the server alone (one read, one event, one
write), however slow valgrind and the machine make it, and the count is the same run after
run. Each round counts `window` chunks in the middle of a reply (from the WARM-th chunk's
arrival on, the server idle at both ends): no start, no end, nothing but chunks. A whole
reply of TURN_CHUNKS is counted too, less its chunks: a turn's start and end. `--calls`
prints where the app's loop spends each chunk, by function (cProfile), without valgrind.
Section 14 of the report (`python -m bench.run --only instructions`).

The server's time-driven work is left out: a draft of the reply is saved every
ROJO_DRAFT_SECONDS (5 s: every 250 chunks at 50 a second), the claim kept every
ROJO_TURN_HEARTBEAT_SECONDS (2 s) and malloc_trim called every ROJO_MALLOC_TRIM_SECONDS,
here set to an hour or off so that valgrind's slowness does not multiply them. Instructions
are user space only: a read's and a write's kernel part is not counted, so the ratio to the
floor is higher than the CPU time's (bench/per_chunk.py), where the kernel's share, about the
same for both, dilutes it. Skips, saying why, without valgrind, a C compiler or valgrind's
headers. With BENCH_KEEP_CALLGRIND=<dir>, the counts' files are kept there, for
callgrind_annotate.
"""

import argparse
import asyncio
import itertools
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import callgrind
from . import client as http
from .env import ROOT, project_new, rojo_new, standalone_world
from .provider import BenchProvider, _StampingHandler
from .report import Section
from .server import CALLGRIND_PATH, CALLS_PATH
from .starts import app_opener, floor_opener

LOCKSTEP_TIMEOUT = 600  # seconds a chunk waits for the client to have the one before


class _LockstepHandler(_StampingHandler):
    """Sends a stream's chunks one at a time: each once the client has the one before."""

    def _send_stream(self, reply) -> None:
        steps: threading.Semaphore = self.server.steps
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        *content, finish = reply.chunks
        try:
            for number, item in enumerate(content):
                if number and not steps.acquire(timeout=LOCKSTEP_TIMEOUT):
                    raise TimeoutError("the client did not take a chunk in time")
                self._write_chunk(f"data: {json.dumps(item)}\n\n")
            if not steps.acquire(timeout=LOCKSTEP_TIMEOUT):
                raise TimeoutError("the client did not take the last chunk in time")
            tail = b"".join(  # the end in one write: it arrives in one read
                b"%x\r\n%s\r\n" % (len(text), text)
                for text in (f"data: {json.dumps(finish)}\n\n".encode(), b"data: [DONE]\n\n")
            )
            self.wfile.write(tail + b"0\r\n\r\n")
        except ConnectionError:
            self.close_connection = True


class LockstepProvider(BenchProvider):
    """The bench provider (paced-<n>-0 scenarios), its chunks sent in lockstep with `step`."""

    def __init__(self) -> None:
        super().__init__()
        self._server.RequestHandlerClass = _LockstepHandler
        self._server.steps = threading.Semaphore(0)

    def step(self) -> None:
        """The client has a chunk: the stream may send its next."""
        self._server.steps.release()


@dataclass
class Counted:
    """A server's instructions per chunk, a figure per round, and a turn's start and end."""

    name: str
    per_chunk_rounds: list[float]
    turns: list[int]  # a whole turn of TURN_CHUNKS chunks, from its request to the idle server

    @property
    def per_chunk(self) -> float:
        return _median(self.per_chunk_rounds)

    @property
    def per_turn(self) -> float:
        """A turn's count less its chunks': its start and end."""
        return _median(self.turns) - TURN_CHUNKS * self.per_chunk


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


# A round's reply: WARM chunks, the WINDOW counted, then a few more; a whole turn's count is
# of a reply of TURN_CHUNKS.
WARM, WINDOW, TURN_CHUNKS = 20, 200, 20


def model(chunks: int) -> str:
    return f"paced-{chunks}-0"


class _Counter:
    def __init__(self, server, out_dir: Path, provider: LockstepProvider) -> None:
        self.server, self.out_dir, self.provider = server, out_dir, provider
        self.dumps = 0

    def get(self, action: str) -> None:
        callgrind.wait_idle(self.server.process.pid)  # what came before is done
        answer = self.server._get(f"{CALLGRIND_PATH}?{action}", timeout=600)
        if "error" in answer:
            raise RuntimeError(f"callgrind control: {answer['error']}")

    def dump(self) -> int:
        self.dumps += 1
        label = f"dump-{self.dumps}"
        self.get(label)
        return callgrind.dumped_total(self.out_dir, self.server.process.pid, label)

    def per_chunk(self, opener, window: int) -> float:
        """The server's instructions per chunk while a reply streams: counted from the
        WARM-th chunk's arrival to `window` chunks later (the provider waiting meanwhile for
        the client, the server for the provider: the count holds nothing else)."""
        counted = []
        marks = {WARM: lambda: self.get("zero"), WARM + window: lambda: counted.append(self.dump())}
        asyncio.run(_stream(opener, WARM + window + 5, self.provider, marks))
        return counted[0] / window

    def start(self, opener) -> int:
        """The server's instructions for a chat's start: from before its request to its
        first chunk (the provider then holds the second until the count is taken)."""
        self.get("zero")
        counted = []
        asyncio.run(
            _stream(opener, TURN_CHUNKS, self.provider, {1: lambda: counted.append(self.dump())})
        )
        return counted[0]

    def turn(self, opener) -> int:
        """The server's instructions for a whole reply of TURN_CHUNKS chunks, from before its
        request to the end of the work it does after the reply (the process idle again)."""
        self.get("zero")
        asyncio.run(_stream(opener, TURN_CHUNKS, self.provider))
        return self.dump()


async def _stream(opener, chunks: int, provider: LockstepProvider, marks=None) -> None:
    """Stream a reply of `chunks`, calling marks[n] (if any) once the n-th has arrived."""
    received = 0
    async for _arrived, sent in opener(model(chunks)):
        if sent is not None:
            received += 1
            if marks and received in marks:
                marks[received]()
            provider.step()
    if received != chunks:
        raise RuntimeError(f"{received} of {chunks} chunks arrived")


def instructions(
    window: int = WINDOW, rounds: int = 3, loop: str = "asyncio"
) -> list[Counted] | str:
    """In a standalone world: the floor's and the app's counts ([floor, app]), or why they
    cannot be taken. `loop` "uvloop": both on uvloop (the app as BENCH_SERVER=uvicorn-uvloop)."""
    if reason := callgrind.missing():
        return reason
    with standalone_world() as (environ, _bench_provider, scratch, fixtures):
        if loop == "uvloop":
            environ = {**environ, "BENCH_SERVER": "uvicorn-uvloop", "BENCH_FLOOR_LOOP": "uvloop"}
        return instructions_count(environ, scratch, fixtures, window=window, rounds=rounds)


def instructions_count(
    environ: dict[str, str], scratch: Path, fixtures, *, window: int = WINDOW, rounds: int = 3
) -> list[Counted] | str:
    """The floor's and the app's counts ([floor, app]) in the world set up in this process
    (`environ`, `scratch`, the bench user's `fixtures`), or why they cannot be taken."""
    if reason := callgrind.missing():
        return reason
    from .floor import floor_start
    from .server import server_start

    provider = LockstepProvider()
    out_dir = scratch / "callgrind"
    log = scratch / "server.log"
    try:
        library = callgrind.control_library(scratch)
        out_dir.mkdir(exist_ok=True)
        for n in (TURN_CHUNKS, WARM + window + 5):
            rojo_new(model(n), provider.base_url, model(n))
        project_id = project_new("instructions").pk
        environ = {
            **environ,
            callgrind.LIBRARY_ENV: str(library),
            "PYTHONHASHSEED": "0",
            # Time-driven work, which valgrind's slowness would multiply: left out.
            "ROJO_DRAFT_SECONDS": "3600",
            "ROJO_TURN_HEARTBEAT_SECONDS": "3600",
            "ROJO_MALLOC_TRIM_SECONDS": "0",
        }
        wrapper = callgrind.valgrind_command(out_dir)
        results = []
        for name in ("floor", "app"):
            if name == "floor":
                server = floor_start(environ, provider.base_url, log, wrapper=wrapper)
                opener = floor_opener(server)
            else:
                server = server_start(environ, log, wrapper=wrapper)
                target = http.Target(
                    "127.0.0.1", server.port, fixtures.session_key, fixtures.csrf_token
                )
                opener = app_opener(target, project_id)
            try:
                counter = _Counter(server, out_dir, provider)
                for n in (TURN_CHUNKS, TURN_CHUNKS):  # warm: lazy imports, caches, firsts
                    asyncio.run(_stream(opener, n, provider))
                counter.get("start")
                per_chunk = [counter.per_chunk(opener, window) for _ in range(rounds)]
                turns = [counter.turn(opener) for _ in range(rounds)]
                results.append(Counted(name, per_chunk, turns))
            finally:
                server.stop()
    finally:
        provider.close()
        if keep := os.environ.get("BENCH_KEEP_CALLGRIND"):  # for callgrind_annotate
            shutil.copytree(out_dir, keep, dirs_exist_ok=True)
        shutil.rmtree(out_dir, ignore_errors=True)
        if os.environ.get("BENCH_KEEP_LOG"):
            print(log.read_text()[-3000:])
    return results


# Issue #38's changes to the per-chunk path, each counted by this benchmark before and after
# (app, instructions per chunk; the floor's 94,200 to 95,100 throughout).
CHANGES = (
    ("baseline", 208_640),
    ("a follower that keeps up: a future per wait, no Event per publish, the last chunk "
     "given as it was published", 190_698),
    ("the write: the body handed to the server as it is (no Django wrapping generators), "
     "one message without chunk_bytes' generator, uvicorn's send straight from WriteTimeout",
     181_829),
    ("the read: parse and check in _parse_lines, the read in read_or_tick, a text-only "
     "delta done after its text", 179_055),
    ("publish wakes followers itself, follow_batches waits without changed(), encode_sse "
     "calls orjson, provider_chunks splits the lines", 176_076),
    ("the provider's socket read at most 32 KiB at a time (asyncio's 256 KiB buffer was "
     "mapped, remapped and unmapped for every chunk: 8.2 system calls per chunk, now 5.2; "
     "the floor's 7.0)", 174_966),
    ("the chat's response written by the turn's own task while it has every event, a read's "
     "chunks at once as the turn waits for the next (no wake-up of the response's task, no "
     "loop pass, no generators on its side: 2 loop passes a chunk, as the floor's)", 154_693),
)  # fmt: skip


def instructions_section(results: list[Counted] | str) -> Section:
    """Section 14: the counts beside each other, or why there are none."""
    section = Section(
        "14. Instructions per chunk",
        "User-space instructions the server executes per streamed chunk, counted by "
        "valgrind's callgrind (`bench/instructions.py`), so the same on a busy machine as on "
        f"a quiet one: {WINDOW} chunks in the middle of a reply, sent in lockstep (the "
        "provider sends a chunk once the client has the one before: each crosses alone), on "
        "the app and on the floor relay; the median of 3 rounds. A turn's start and end: a "
        f"whole reply of {TURN_CHUNKS} chunks less its chunks. Time-driven work (drafts, "
        "heartbeats, malloc_trim) is left out; the kernel's part of each read and write is not "
        "counted, so the ratio runs higher than section 10's CPU time ratio.",
    )
    if isinstance(results, str):
        section.add("instructions", "not measured", note=results)
        return section
    floor, app = results
    for counted in results:
        rounds = ", ".join(f"{value:,.0f}" for value in counted.per_chunk_rounds)
        section.add(f"{counted.name}_instructions_per_chunk", f"{counted.per_chunk:,.0f}",
                    note=f"rounds: {rounds}")  # fmt: skip
    section.add("app_vs_floor_instructions_per_chunk", f"{app.per_chunk / floor.per_chunk:.2f}x")
    for counted in results:
        section.add(f"{counted.name}_turn_start_and_end", f"{counted.per_turn / 1e6:.1f} M")
    steps = "; ".join(
        f"{what}: {before:,} → {after:,}"
        for (_, before), (what, after) in itertools.pairwise(CHANGES)
    )
    section.notes += [
        f"Issue #38, instructions per chunk of the app before and after each change: {steps}.",
        "What is left (`python -m bench.instructions --calls`): about 175 calls per chunk. "
        "Before the last change a chunk took three loop passes in the app (the provider's "
        "read woke the turn's task, whose event woke the response's, which wrote) against "
        "two in the floor, whose one task reads and writes; now two, as the floor. The "
        "turn's chunks still cross three async generators (provider_chunks, "
        "TurnRequests.stream, agent_loop), about 1,600 instructions each (two more measured "
        "+3,150); the rest is the work the floor does not do: parsing each chunk, the "
        "accumulator, the turn's log, encoding the event.",
        "On uvloop (`python -m bench.instructions --loop uvloop`, uvloop installed by hand: "
        "the app as BENCH_SERVER=uvicorn-uvloop, the floor with BENCH_FLOOR_LOOP=uvloop), "
        "same code as the 176,076 above: floor 53,691, app 121,293 instructions per chunk "
        "(2.26x its own floor, 1.28x asyncio's; the app 31% fewer than on asyncio), a "
        "turn's start and end 33.1 M; system calls per chunk (strace, same lockstep): floor "
        "3.0, app 4.2 (on asyncio 7.0 and 5.2). Whether that holds in CPU time is "
        "`python -m bench.per_chunk --servers uvicorn,uvicorn-uvloop` on a quiet machine.",
        "Where a turn's start and end go (6 December 2026, one round each, by hand): 89% of "
        "their instructions are the Python interpreter's (libpython), 4% SQLite's, 4% the C "
        "library's, under 1% each orjson's, json's and the HTTP parsers'. The parts of the "
        "fixed design measured by taking them out of a copy of the tree: the SDK's request "
        "(its options, headers, URL and retries, against the same request sent on its own "
        "httpx client) 1.41 M of 25.4 M (5.6%); the five middlewares the chat needs least "
        "(security, common, messages, clickjacking, the content security policy) 0.55 M "
        "(2.2%). Timed alone on a database thread (thread CPU, 300 calls each): the "
        "session's user 273 µs, the chat's checks 165 µs, the turn's begin 1,260 µs, of "
        "which the ORM's three inserts (the conversation, the message, the turn's record) "
        "are four fifths; a hand-compiled insert of the same message took 100 µs against "
        "the ORM's 170 to 180 µs, which would take about 0.2 ms from a start.",
    ]
    return section


def start_instructions(rounds: int = 5) -> list[int] | str:
    """The app's instructions per chat start (request to first chunk), a figure per round, in
    a standalone world; or why they cannot be taken."""
    if reason := callgrind.missing():
        return reason
    from .server import server_start

    with standalone_world() as (environ, _bench_provider, scratch, fixtures):
        provider = LockstepProvider()
        out_dir = scratch / "callgrind"
        out_dir.mkdir(exist_ok=True)
        try:
            rojo_new(model(TURN_CHUNKS), provider.base_url, model(TURN_CHUNKS))
            project_id = project_new("starts").pk
            environ = {
                **environ,
                callgrind.LIBRARY_ENV: str(callgrind.control_library(scratch)),
                "PYTHONHASHSEED": "0",
                "ROJO_DRAFT_SECONDS": "3600",
                "ROJO_TURN_HEARTBEAT_SECONDS": "3600",
                "ROJO_MALLOC_TRIM_SECONDS": "0",
            }
            server = server_start(
                environ, scratch / "server.log", wrapper=callgrind.valgrind_command(out_dir)
            )
            try:
                target = http.Target(
                    "127.0.0.1", server.port, fixtures.session_key, fixtures.csrf_token
                )
                opener = app_opener(target, project_id)
                counter = _Counter(server, out_dir, provider)
                for _ in range(
                    8
                ):  # warm: lazy imports, caches, firsts (3 left the next starts 1 M higher)
                    asyncio.run(_stream(opener, TURN_CHUNKS, provider))
                counter.get("start")
                return [counter.start(opener) for _ in range(rounds)]
            finally:
                server.stop()
        finally:
            provider.close()
            if keep := os.environ.get("BENCH_KEEP_CALLGRIND"):
                shutil.copytree(out_dir, keep, dirs_exist_ok=True)


def calls_per_start(rounds: int = 20, top: int = 40) -> None:
    """Print where the app's event loop spends a chat's start (request to first chunk), by
    function: calls per start and CPU per start (cProfile's, inflated by it)."""
    from .server import server_start

    with standalone_world() as (environ, _bench_provider, scratch, fixtures):
        provider = LockstepProvider()
        rojo_new(model(TURN_CHUNKS), provider.base_url, model(TURN_CHUNKS))
        project_id = project_new("calls").pk
        environ = {**environ, "ROJO_DRAFT_SECONDS": "3600", "ROJO_TURN_HEARTBEAT_SECONDS": "3600"}
        server = server_start(environ, scratch / "server.log")
        totals: dict[str, list[float]] = {}
        try:
            target = http.Target("127.0.0.1", server.port, fixtures.session_key, "")
            target.csrf_token = fixtures.csrf_token
            opener = app_opener(target, project_id)

            def get(action: str) -> None:
                callgrind.wait_idle(server.process.pid)
                answer = server._get(f"{CALLS_PATH}?{action}", timeout=60)
                if action == "take":
                    for key, (calls, own, cumulative) in answer.items():
                        row = totals.setdefault(key, [0, 0.0, 0.0])
                        row[0] += calls
                        row[1] += own
                        row[2] += cumulative

            for _ in range(3):
                asyncio.run(_stream(opener, TURN_CHUNKS, provider))
            for _ in range(rounds):
                get("zero")
                asyncio.run(_stream(opener, TURN_CHUNKS, provider, {1: lambda: get("take")}))
        finally:
            server.stop()
            provider.close()
    if keep := os.environ.get("BENCH_KEEP_CALLS"):  # every function's figures, as JSON
        Path(keep).write_text(json.dumps(totals))
    rows = sorted(
        (
            (calls / rounds, own / rounds * 1e6, cumulative / rounds * 1e6, key)
            for key, (calls, own, cumulative) in totals.items()
        ),
        key=lambda row: -row[1],
    )
    print(f"{'calls/start':>11} {'own µs':>8} {'with callees':>12}  function")
    for calls, own_us, cumulative_us, key in rows[:top]:
        print(f"{calls:11.2f} {own_us:8.1f} {cumulative_us:12.1f}  {key.replace(str(ROOT), '.')}")
    print(f"{sum(r[0] for r in rows):11.2f} {sum(r[1] for r in rows):8.1f}  (all)")
    print("\nThe project's own functions, by time with callees:")
    for calls, own_us, cumulative_us, key in sorted(rows, key=lambda row: -row[2]):
        if key.startswith(str(ROOT)) and "/.venv/" not in key:
            print(
                f"{calls:11.2f} {own_us:8.1f} {cumulative_us:12.1f}  {key.replace(str(ROOT), '.')}"
            )


def calls_per_chunk(window: int = WINDOW, top: int = 40) -> None:
    """Print where the app's event loop spends each chunk, by function: calls per chunk
    (counted, so exact) and CPU per chunk (cProfile's, inflated by it), in the window that
    `instructions` counts; no valgrind needed."""
    from .server import server_start

    with standalone_world() as (environ, _bench_provider, scratch, fixtures):
        provider = LockstepProvider()
        rojo_new(model(WARM + window + 5), provider.base_url, model(WARM + window + 5))
        project_id = project_new("calls").pk
        environ = {**environ, "ROJO_DRAFT_SECONDS": "3600", "ROJO_TURN_HEARTBEAT_SECONDS": "3600"}
        server = server_start(environ, scratch / "server.log")
        try:
            target = http.Target("127.0.0.1", server.port, fixtures.session_key, "")
            target.csrf_token = fixtures.csrf_token
            opener = app_opener(target, project_id)
            taken = []

            def get(action: str) -> None:
                callgrind.wait_idle(server.process.pid)
                taken.append(server._get(f"{CALLS_PATH}?{action}", timeout=60))

            marks = {WARM: lambda: get("zero"), WARM + window: lambda: get("take")}
            asyncio.run(_stream(opener, WARM + window + 5, provider))  # warm
            asyncio.run(_stream(opener, WARM + window + 5, provider, marks))
        finally:
            server.stop()
            provider.close()
    rows = sorted(
        ((calls / window, own / window * 1e6, key) for key, (calls, own, _) in taken[1].items()),
        key=lambda row: -row[1],
    )
    print(f"{'calls/chunk':>11} {'own µs/chunk':>12}  function")
    for calls, own_us, key in rows[:top]:
        print(f"{calls:11.2f} {own_us:12.2f}  {key.replace(str(ROOT), '.')}")
    total_calls = sum(row[0] for row in rows)
    print(f"{total_calls:11.2f} {sum(row[1] for row in rows):12.2f}  (all)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=WINDOW, help="the chunks counted")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument(
        "--calls", action="store_true", help="the app's calls per chunk, by function (cProfile)"
    )
    parser.add_argument("--top", type=int, default=40, help="with --calls: the functions shown")
    parser.add_argument(
        "--starts", action="store_true", help="the app's instructions per chat start instead"
    )
    args = parser.parse_args()
    if args.starts and args.calls:
        calls_per_start(top=args.top)
        return
    if args.starts:
        counts = start_instructions(args.rounds)
        if isinstance(counts, str):
            print(f"skipped: {counts}")
            return
        rounds = ", ".join(f"{value:,}" for value in counts)
        print(f"a chat's start: {_median(counts):,} instructions (rounds: {rounds})")
        return
    if args.calls:
        calls_per_chunk(args.window, args.top)
        return
    started = time.monotonic()
    results = instructions(args.window, args.rounds, args.loop)
    if isinstance(results, str):
        print(f"skipped: {results}")
        return
    floor = results[0].per_chunk
    for counted in results:
        rounds = ", ".join(f"{value:,.0f}" for value in counted.per_chunk_rounds)
        print(
            f"{counted.name:>6}: {counted.per_chunk:9,.0f} instructions/chunk "
            f"{counted.per_chunk / floor:5.2f}x floor ({rounds}); a turn's start and end "
            f"{counted.per_turn:11,.0f}"
        )
    print(f"took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
