"""2. Streaming latency: how long a chunk takes from leaving the provider to reaching the client.

The provider paces its chunks 20 ms apart and writes its monotonic clock into each as it
sends it; the client reads the same clock when the event arrives. Both run on this machine,
so the difference is the delay the server (and the loopback and the client) add.
"""

import asyncio
import time
from dataclasses import dataclass, field

from . import client as http
from .stats import median, percentile


@dataclass
class LatencyResult:
    streams: int
    # Each stream's first chunk apart: its response begins with the others' (section 2's note).
    first_ms: list[float] = field(default_factory=list)
    later_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    # The server's garbage-collector passes meanwhile: (generation, ms).
    gc_pauses: list[tuple[int, float]] = field(default_factory=list)

    @property
    def samples_ms(self) -> list[float]:
        """Every chunk's delay."""
        return self.first_ms + self.later_ms

    @property
    def p50(self) -> float:
        return median(self.samples_ms)

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)

    @property
    def worst(self) -> float:
        return max(self.samples_ms)


def sent_ns(event: http.Event) -> int:
    """The provider's send time written into a stamped CHAT event's text."""
    return int(event.data["text"].split()[0])


def stamps_ns(event: http.Event) -> list[int]:
    """Every provider send time in a CHAT event's text: a follower that fell behind gets a
    run of chunks as one event, each chunk one stamp."""
    return [int(word) for word in event.data["text"].split()]


async def stream_latencies(
    target: http.Target, project_id: int, rojo_slug: str, result: LatencyResult
) -> None:
    """One conversation; each CHAT event's delay goes into `result`."""
    path = f"/api/projects/{project_id}/chat"
    first = True
    try:
        async for event in http.events(target, path, {"rojo": rojo_slug, "message": "Go."}):
            if event.type == "CHAT":
                delays = [(event.arrived_ns - sent) / 1e6 for sent in stamps_ns(event)]
                if first and delays:
                    result.first_ms.append(delays[0])
                    delays = delays[1:]
                    first = False
                result.later_ms.extend(delays)
            elif event.type == "ERROR":
                result.errors.append(event.data.get("message", ""))
    except (OSError, http.HttpStatusError) as exc:
        result.errors.append(repr(exc))


async def latency(
    server, target: http.Target, project_id: int, rojo_slug: str, *, streams: int, rounds: int = 1
) -> LatencyResult:
    """`streams` conversations at once, `rounds` times over."""
    result = LatencyResult(streams=streams)
    before = await asyncio.to_thread(server.usage)
    start = time.monotonic()
    with http.few_gc_pauses():
        for _ in range(rounds):
            await asyncio.gather(
                *(stream_latencies(target, project_id, rojo_slug, result) for _ in range(streams))
            )
    result.wall_s = time.monotonic() - start
    after = await asyncio.to_thread(server.usage)
    result.server_cpu_s = (after["cpu_ns"] - before["cpu_ns"]) / 1e9
    result.gc_pauses = [tuple(p) for p in after["gc_pauses"][len(before["gc_pauses"]) :]]
    return result
