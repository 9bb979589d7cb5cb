"""3. Concurrency: hundreds of simultaneous conversations on one server process.

Each conversation is one list_files call and then 100 chunks paced 20 ms apart. Every one
must end in DONE without an ERROR; the server's peak memory above its idle size, divided by
the number of conversations, is the memory per stream.
"""

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from . import client as http
from .latency import stamps_ns
from .stats import percentile

CHUNKS = 100


@dataclass
class ConcurrencyResult:
    conversations: int
    completed: int = 0
    failures: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    idle_rss_mib: float = 0.0
    peak_rss_mib: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return self.conversations - self.completed

    @property
    def per_stream_kib(self) -> float:
        return (self.peak_rss_mib - self.idle_rss_mib) * 1024 / self.conversations

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_ms, 99)


def _verdict(events: list[http.Event]) -> str | None:
    """None for a complete, clean conversation; else what was wrong with it."""
    kinds = Counter(e.type for e in events)
    if kinds["ERROR"]:
        error = next(e for e in events if e.type == "ERROR")
        return f"ERROR {error.data.get('code')}: {error.data.get('message', '')[:80]}"
    if not events or events[-1].type != "DONE":
        return "no DONE"
    results = [e for e in events if e.type == "TOOL_RESULT"]
    if len(results) != 1 or not results[0].data["ok"]:
        return "tool call missing or failed"
    chunks = sum(len(stamps_ns(e)) for e in events if e.type == "CHAT")
    if chunks != CHUNKS:
        return f"{chunks} of {CHUNKS} chunks"
    return None


async def _conversation(
    target: http.Target, project_id: int, rojo_slug: str, result: ConcurrencyResult
) -> None:
    try:
        events = await http.chat(target, project_id, rojo_slug, "List the files, then talk.")
    except http.HttpStatusError as exc:
        result.failures[f"HTTP {str(exc)[:120]}"] += 1
        return
    except (OSError, asyncio.IncompleteReadError) as exc:
        result.failures[exc.__class__.__name__] += 1
        return
    problem = _verdict(events)
    if problem:
        result.failures[problem] += 1
        return
    result.completed += 1
    result.latencies_ms.extend(
        (e.arrived_ns - sent) / 1e6 for e in events if e.type == "CHAT" for sent in stamps_ns(e)
    )


async def concurrency(
    server, target: http.Target, project_id: int, rojo_slug: str, *, conversations: int
) -> ConcurrencyResult:
    """Run `conversations` at once against a server that has just been warmed up."""
    result = ConcurrencyResult(conversations=conversations)
    await _conversation(target, project_id, rojo_slug, ConcurrencyResult(conversations=1))
    result.idle_rss_mib = server.memory_kib()["VmRSS"] / 1024
    cpu_before = await asyncio.to_thread(server.cpu_ns)
    start = time.monotonic()
    with http.few_gc_pauses():
        await asyncio.gather(
            *(_conversation(target, project_id, rojo_slug, result) for _ in range(conversations))
        )
    result.wall_s = time.monotonic() - start
    result.server_cpu_s = (await asyncio.to_thread(server.cpu_ns) - cpu_before) / 1e9
    result.peak_rss_mib = server.memory_kib()["VmHWM"] / 1024
    return result
