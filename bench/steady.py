"""Server CPU per chunk while many streams run (steady state): no turn start in the window.

Section 2's figure (server CPU over its run, divided by the chunks) counts the 200 turn
starts too: at ~14 ms of CPU each they are most of it (140 µs of ~160 µs per chunk), and
the per-chunk path is lost beside them. Here the window opens once every stream has had its
first chunk and closes STEADY_WINDOW_S later (or when the first stream ends, if sooner):
the server's CPU in it over the chunks that arrived in it. The same function measures the
app and the floor, through their openers (bench/starts.py).
"""

import asyncio
import time
from dataclasses import dataclass

from . import client as http
from .starts import Opener

STEADY_STREAMS = 200
STEADY_WINDOW_S = 1.5


def steady_model(streams: int) -> str:
    """The provider's scenario: 3 s of chunks 20 ms apart, all streams at once."""
    return f"paced-150-20-together-{streams}"


STEADY_MODEL = steady_model(STEADY_STREAMS)


@dataclass
class Steady:
    per_chunk_us: float
    chunks: int  # in the window
    window_s: float


class _Count:
    def __init__(self, streams: int) -> None:
        self.chunks = 0
        self.started = 0
        self.streams = streams
        self.all_started = asyncio.Event()
        self.one_ended = asyncio.Event()


async def _stream(open_stream: Opener, model: str, count: _Count) -> None:
    first = True
    try:
        async for _arrived, sent in open_stream(model):
            if sent is None:
                continue
            count.chunks += 1
            if first:
                first = False
                count.started += 1
                if count.started == count.streams:
                    count.all_started.set()
    finally:
        count.one_ended.set()


async def _cpu_at(server, count: _Count) -> tuple[int, float]:
    """The server's CPU (ns), and the chunks counted meanwhile (the mean of before and after
    the call: the server reads its clock somewhere between)."""
    before = count.chunks
    cpu = await asyncio.to_thread(server.cpu_ns)
    return cpu, (before + count.chunks) / 2


async def steady_per_chunk(server, open_stream: Opener, *, streams: int = STEADY_STREAMS) -> Steady:
    """`streams` streams at once; the CPU per chunk in the window after all started."""
    model = steady_model(streams)
    count = _Count(streams)
    with http.few_gc_pauses():
        tasks = [asyncio.create_task(_stream(open_stream, model, count)) for _ in range(streams)]
        try:
            await asyncio.wait(
                [asyncio.ensure_future(count.all_started.wait()), *tasks],
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not count.all_started.is_set():
                raise RuntimeError(f"a stream ended before all {streams} started")
            cpu0, chunks0 = await _cpu_at(server, count)
            opened = time.monotonic()
            ended = asyncio.ensure_future(count.one_ended.wait())
            await asyncio.wait([ended], timeout=STEADY_WINDOW_S)
            ended.cancel()
            cpu1, chunks1 = await _cpu_at(server, count)
            window = time.monotonic() - opened
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
    chunks = chunks1 - chunks0
    return Steady(per_chunk_us=(cpu1 - cpu0) / 1e3 / max(chunks, 1), chunks=int(chunks),
                  window_s=window)  # fmt: skip
