"""Turn starts under a burst, and the floor's figures: the same load on the app and on the floor.

A burst: RUNNING streams are already streaming (their own starts over) when BURST more
conversations start at once. Each burst stream's first chunk is timed from the moment its
request was sent; the running streams' chunk latency (the provider's stamp to arrival) is
kept for the burst's window, and for the second before it. The same load goes through the
floor (bench/floor.py), whose figures the app's are divided by.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from . import client as http
from .floor import floor_stream, provider_body
from .latency import stamps_ns
from .stats import median, percentile

RUNNING, BURST = 50, 200
RUNNING_MODEL = "paced-400-20"  # 8 s: outlasts the slowest burst measured so far (3.4 s)
BURST_MODEL, BURST_CHUNKS = "paced-20-20", 20
CHUNK_GAP_MS = 20  # both models' pace
SEQUENTIAL_RUNS = 20
# A paced conversation (issue #38): a reply of 500 chunks 20 ms apart (10 s), one on the app
# and one on the floor at a time (paced_pair); an odd number of pairs, so that one is the median.
PACED_MODEL, PACED_RUNS = "paced-500-20", 5

# (arrived ns, the provider's stamp in ns or None) for each chunk of one stream.
Opener = Callable[[str], AsyncIterator[tuple[int, int | None]]]


def app_opener(target: http.Target, project_id: int) -> Opener:
    """A chat on the app: the rojo whose slug is the model's name; CHAT events."""

    async def stream(model: str):
        path = f"/api/projects/{project_id}/chat"
        async for event in http.events(target, path, {"rojo": model, "message": "Go."}):
            if event.type == "CHAT":
                for sent in stamps_ns(event):
                    yield event.arrived_ns, sent
            elif event.type == "ERROR":
                raise http.HttpStatusError(f"ERROR {event.data.get('message', '')[:80]}")

    return stream


def floor_opener(floor) -> Opener:
    async def stream(model: str):
        async for piece in floor_stream(floor, provider_body(model)):
            yield piece.arrived_ns, piece.sent_ns

    return stream


@dataclass
class BurstResult:
    first_chunk_ms: list[float] = field(default_factory=list)
    completed: int = 0
    errors: list[str] = field(default_factory=list)
    before_ms: list[float] = field(default_factory=list)  # running streams, before the burst
    during_ms: list[float] = field(default_factory=list)  # running streams, during it
    burst_s: float = 0.0
    server_cpu_s: float = 0.0

    @property
    def first_p50(self) -> float:
        return median(self.first_chunk_ms) if self.first_chunk_ms else float("inf")

    @property
    def first_p99(self) -> float:
        return percentile(self.first_chunk_ms, 99) if self.first_chunk_ms else float("inf")

    @property
    def during_p99(self) -> float:
        return percentile(self.during_ms, 99) if self.during_ms else float("inf")

    @property
    def before_p99(self) -> float:
        return percentile(self.before_ms, 99) if self.before_ms else float("inf")


async def _one(open_stream: Opener, model: str, result: BurstResult, samples: list | None):
    """One stream; its first chunk's delay (ms) and its chunk count, or None if it failed."""
    started = time.monotonic_ns()
    first, chunks = None, 0
    try:
        async for arrived, sent in open_stream(model):
            if sent is None:  # the provider's last chunk (finish reason), or a tool call's
                continue
            first = (arrived - started) / 1e6 if first is None else first
            chunks += 1
            if samples is not None:
                samples.append((arrived, (arrived - sent) / 1e6))
    except (OSError, asyncio.IncompleteReadError, http.HttpStatusError) as exc:
        result.errors.append(repr(exc)[:120])
        return None
    return first, chunks


async def burst(server, open_stream: Opener) -> BurstResult:
    """RUNNING streams, then BURST starts at once while they run."""
    result = BurstResult()
    samples: list[tuple[int, float]] = []
    await _one(open_stream, BURST_MODEL, BurstResult(), None)  # warm, as section 3 does
    with http.few_gc_pauses():
        running = [
            asyncio.create_task(_one(open_stream, RUNNING_MODEL, result, samples))
            for _ in range(RUNNING)
        ]
        await asyncio.sleep(1.5)  # all streaming, their own starts over
        quiet_from = time.monotonic_ns() - 1_000_000_000
        cpu_before = await asyncio.to_thread(server.cpu_ns)
        begun = time.monotonic_ns()
        outcomes = await asyncio.gather(
            *(_one(open_stream, BURST_MODEL, result, None) for _ in range(BURST))
        )
        ended = time.monotonic_ns()
        result.server_cpu_s = (await asyncio.to_thread(server.cpu_ns) - cpu_before) / 1e9
        await asyncio.gather(*running)
    result.burst_s = (ended - begun) / 1e9
    for outcome in outcomes:
        if outcome is not None:
            result.first_chunk_ms.append(outcome[0])
            result.completed += outcome[1] == BURST_CHUNKS
    result.before_ms = [ms for at, ms in samples if quiet_from <= at < begun]
    result.during_ms = [ms for at, ms in samples if begun <= at < ended]
    return result


@dataclass
class FloorFigures:
    """The floor's own figures, for the ratios."""

    sequential_cpu_ms: float = 0.0  # the verification story, one at a time
    concurrent_cpu_ms: float = 0.0  # tool-paced-100-20, 200 at once
    per_chunk_us: float = 0.0  # 200 streams, once all started (bench/steady.py)
    per_chunk_with_starts_us: float = 0.0  # paced-100-20, 200 streams, starts included
    per_stream_kib: float = 0.0  # peak RSS above idle, 200 streams, per stream
    paced_cpu_ms: float = 0.0  # one PACED_MODEL conversation at a time (paced_pair)
    burst: BurstResult | None = None


async def _conversation(floor, model: str, steps: int) -> int:
    chunks = 0
    for step in range(steps):
        async for _ in floor_stream(floor, provider_body(model, step)):
            chunks += 1
    return chunks


async def floor_figures(floor, concurrent: int) -> FloorFigures:
    """The floor under the app's loads: the story in sequence, `concurrent` tool-paced
    conversations at once, as many paced streams, and the burst."""
    from .steady import steady_per_chunk  # it imports Opener from here

    figures = FloorFigures()
    await _conversation(floor, "story", 3)  # warm
    before = await asyncio.to_thread(floor.cpu_ns)
    for _ in range(SEQUENTIAL_RUNS):
        await _conversation(floor, "story", 3)
    spent_ms = (await asyncio.to_thread(floor.cpu_ns) - before) / 1e6
    figures.sequential_cpu_ms = spent_ms / SEQUENTIAL_RUNS
    idle = floor.memory_kib()["VmRSS"]
    before = await asyncio.to_thread(floor.cpu_ns)
    with http.few_gc_pauses():
        await asyncio.gather(
            *(_conversation(floor, "tool-paced-100-20", 2) for _ in range(concurrent))
        )
    figures.concurrent_cpu_ms = (await asyncio.to_thread(floor.cpu_ns) - before) / 1e6 / concurrent
    figures.per_stream_kib = (floor.memory_kib()["VmHWM"] - idle) / concurrent
    before = await asyncio.to_thread(floor.cpu_ns)
    model = f"paced-100-20-together-{concurrent}"
    with http.few_gc_pauses():
        chunks = sum(
            await asyncio.gather(*(_conversation(floor, model, 1) for _ in range(concurrent)))
        )
    figures.per_chunk_with_starts_us = (
        (await asyncio.to_thread(floor.cpu_ns) - before) / 1e3 / chunks
    )
    steady = await steady_per_chunk(floor, floor_opener(floor), streams=concurrent)
    figures.per_chunk_us = steady.per_chunk_us
    figures.burst = await burst(floor, floor_opener(floor))
    return figures


async def _sequential_cpu_ms(server, open_stream: Opener, runs: int) -> float:
    """Server CPU per conversation of BURST_MODEL, one at a time (no contention)."""
    await _one(open_stream, BURST_MODEL, BurstResult(), None)
    await asyncio.to_thread(server.profile_reset)
    before = await asyncio.to_thread(server.cpu_ns)
    for _ in range(runs):
        await _one(open_stream, BURST_MODEL, BurstResult(), None)
    return (await asyncio.to_thread(server.cpu_ns) - before) / 1e6 / runs


async def _paced_ms(server, open_stream: Opener) -> float:
    before = await asyncio.to_thread(server.cpu_ns)
    await _one(open_stream, PACED_MODEL, BurstResult(), None)
    await asyncio.sleep(0.3)  # the turn's end is stored after its last event
    return (await asyncio.to_thread(server.cpu_ns) - before) / 1e6


async def paced_pair(app, app_stream: Opener, floor, floor_stream: Opener) -> tuple[float, float]:
    """Server CPU per PACED_MODEL conversation, its start and its end (what the server does
    after the last chunk) included, on the app and on the floor at the same time: of
    PACED_RUNS such pairs, the one whose ratio is the median.

    This figure is mostly wake-ups (500 chunks 20 ms apart), and what a wake-up costs moves
    with the host within seconds. Taking turns, a conversation each, the floor's own figure
    moved between 142 and 200 ms from one turn to the next and the ratio between 1.20x and
    1.41x in eight pairs (7 December 2026); run together, both meet the same host at the
    same moment: 1.23x to 1.29x in eight pairs of the same run (docs/performance.md,
    section 10's notes)."""
    pairs = [
        await asyncio.gather(_paced_ms(app, app_stream), _paced_ms(floor, floor_stream))
        for _ in range(PACED_RUNS)
    ]
    pairs.sort(key=lambda pair: pair[0] / pair[1])
    app_ms, floor_ms = pairs[len(pairs) // 2]
    return app_ms, floor_ms


async def _crossings(server, open_stream: Opener) -> dict:
    """The calls one conversation hands to the database threads, its turn's end included."""
    await _one(open_stream, BURST_MODEL, BurstResult(), None)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(server.crossings)
    await _one(open_stream, BURST_MODEL, BurstResult(), None)
    await asyncio.sleep(0.5)  # the turn's end is stored after its last event
    return await asyncio.to_thread(server.crossings)


def main() -> None:
    """The burst alone on a fresh world, in rounds of (BENCH_BASELINE_TREE's server, the
    --tree ones, this tree's), each on a fresh server process: `python -m bench.starts`."""
    import argparse
    import os
    from pathlib import Path

    from . import env
    from .server import server_start

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--crossings", action="store_true", help="count them on one chat")
    parser.add_argument("--tree", action="append", default=[], help="LABEL=DIR, another tree")
    parser.add_argument("--sequential", type=int, default=SEQUENTIAL_RUNS, metavar="N")
    parser.add_argument("--no-burst", action="store_true", help="only the sequential CPU")
    args = parser.parse_args()
    baseline = os.environ.get("BENCH_BASELINE_TREE")
    trees = {"before": Path(baseline)} if baseline else {}
    trees.update((label, Path(tree)) for label, _, tree in (t.partition("=") for t in args.tree))
    with env.standalone_world() as (environ, provider, scratch, fixtures):
        for model in (RUNNING_MODEL, BURST_MODEL):
            env.rojo_new(model, provider.base_url, model)
        project = env.project_new("starts")
        target = http.Target("127.0.0.1", 0, fixtures.session_key, fixtures.csrf_token)
        opener = app_opener(target, project.pk)
        counting = {"BENCH_COUNT_CROSSINGS": "1"} if args.crossings else {}
        for round_ in range(args.rounds):
            for label, tree in {**trees, "app": None}.items():
                server = server_start({**environ, **counting}, scratch / "server.log", tree)
                target.port = server.port
                try:
                    if args.crossings:
                        print(label, json.dumps(asyncio.run(_crossings(server, opener))))
                        continue
                    cpu_ms = asyncio.run(_sequential_cpu_ms(server, opener, args.sequential))
                    result = None if args.no_burst else asyncio.run(burst(server, opener))
                finally:
                    server.stop()
                if result is None:
                    load = os.getloadavg()[0]
                    print(f"{round_} {label}: sequential {cpu_ms:.1f} ms/chat, load {load:.1f}")
                    continue
                print(
                    f"{round_} {label}: sequential {cpu_ms:.1f} ms/chat; burst "
                    f"{result.server_cpu_s * 1000 / BURST:.1f} ms/start, first chunk p50 "
                    f"{result.first_p50 / 1000:.2f} s p99 {result.first_p99 / 1000:.2f} s, "
                    f"running p99 {result.during_p99:.1f} ms (before {result.before_p99:.1f}), "
                    f"{result.completed}/{BURST} complete, {len(result.errors)} errors, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
