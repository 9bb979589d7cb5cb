"""12. 1,000 streams on one machine: two server processes on PostgreSQL + Redis.

The scale-out layout of docs/operations.md on one host: two server processes (each on a
port of its own, as `daphne -p 8001` and `-p 8002` behind the proxy), one PostgreSQL
database, one Redis. The client spreads the conversations over the two in turn, so each reply is
followed on the process that runs it and the relay through Redis is not in the path.
Each conversation is a short paced reply (CHUNKS stamped chunks DELAY_MS apart, the
provider holding them until all have asked). Every client must see the whole reply and
DONE, or an ERROR then DONE; anything else is counted as a silent failure.

The one-process level is also the bench's run of 500 conversations at once on PostgreSQL
(issue #7's target: all complete, at most 12 connections open): the connections each level
holds at most are watched from outside.

The per-process CPU per chunk is measured in the steady state: between two readings of
each process's CPU taken once every stream has had its first chunk, over the chunks that
process delivered meanwhile. The one-process figure is the same load per process (half
the streams on one process), in the same run, on the same databases.

With BENCH_POSTGRES_URL (a server on which the bench may create and drop a database) and
BENCH_REDIS_URL (a Redis whose database number the bench may use alone: its keys are
deleted afterwards), `bench/run.py` runs it; by hand: `python -m bench.scale_out
[--streams 1000]` with the same variables (prints the figures, writes nothing).
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit, urlunsplit

from . import client as http
from . import env
from .report import Section
from .stats import percentile

STREAMS, PROCESSES = 1000, 2
CHUNKS, DELAY_MS = 40, 100  # 4 s of chunks: the settle and the window fit in them
P99_MS_MAX = 50.0
CONNECTIONS_MAX = 12  # per process, issue #7's for 500 conversations on PostgreSQL
CPU_RATIO_MAX = 1.10
SETTLE_S = 0.5  # after the last first chunk, before the steady window opens
WINDOW_S = 2.0  # the steady window: each process's CPU over the chunks it delivered


@dataclass
class RunResult:
    """One level: `streams` conversations spread over `processes` server processes."""

    streams: int
    processes: int
    completed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    starts_s: float = 0.0  # from the requests to every stream's first chunk
    p99_ms: float = 0.0  # chunk latency once every stream had its first chunk
    p50_ms: float = 0.0
    chunks_after_starts: int = 0
    window_chunks: list[int] = field(default_factory=list)  # per process
    window_cpu_ms: list[float] = field(default_factory=list)  # per process
    rss_mib: list[float] = field(default_factory=list)  # peak, per process
    connections_max: int = 0  # PostgreSQL connections open at most during the level

    @property
    def cpu_per_chunk_us(self) -> list[float]:
        return [
            cpu * 1000 / chunks if chunks else float("inf")
            for cpu, chunks in zip(self.window_cpu_ms, self.window_chunks, strict=True)
        ]


@dataclass
class ScaleOutResult:
    one: RunResult | None = None
    two: RunResult | None = None
    connections_allowed: int = 0
    fd_limit: int = 0
    error: str = ""


class _Stream:
    """One conversation's client side: what arrived, and how it ended."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.first_ns = 0
        self.stamps = 0
        self.samples: list[tuple[int, float]] = []  # (arrived ns, latency ms)
        self.outcome = ""  # "" for complete, else what went wrong


async def _conversation(target: http.Target, project_id: int, rojo: str, stream: _Stream, first):
    path = f"/api/projects/{project_id}/chat"
    error, done = None, False
    try:
        async for event in http.events(target, path, {"rojo": rojo, "message": "Talk."}):
            if event.type == "CHAT":
                # A follower that fell behind gets several chunks as one event: every
                # stamp in its text is a chunk.
                for word in event.data["text"].split():
                    latency = (event.arrived_ns - int(word)) / 1e6
                    stream.samples.append((event.arrived_ns, latency))
                    stream.stamps += 1
                if not stream.first_ns:
                    stream.first_ns = event.arrived_ns
                    first()
            elif event.type == "ERROR":
                error = event.data.get("code") or "ERROR"
            elif event.type == "DONE":
                done = True
    except http.HttpStatusError as exc:
        stream.outcome = f"HTTP {str(exc)[:60]}"
    except (OSError, asyncio.IncompleteReadError) as exc:
        stream.outcome = f"{exc.__class__.__name__} (no ERROR)"
    else:
        if error:
            stream.outcome = f"ERROR {error}" + ("" if done else " (no DONE)")
        elif not done:
            stream.outcome = "ended without DONE or ERROR"
        elif stream.stamps != CHUNKS:
            stream.outcome = f"DONE after {stream.stamps} of {CHUNKS} chunks, no ERROR"
    if stream.outcome and not stream.first_ns:
        first()  # it will not have one: the starts are over without it


async def _run(servers, targets, project_id: int, rojo: str, streams: int) -> RunResult:
    """`streams` conversations at once over `servers` (round robin)."""
    result = RunResult(streams, len(servers))
    pending = asyncio.Event()
    started = 0

    def first() -> None:
        nonlocal started
        started += 1
        if started == streams:
            pending.set()

    clients = [_Stream(i % len(servers)) for i in range(streams)]
    begun_ns = time.monotonic_ns()
    with http.few_gc_pauses():
        running = asyncio.gather(
            *(_conversation(targets[c.server], project_id, rojo, c, first) for c in clients)
        )
        await asyncio.wait(
            [asyncio.ensure_future(pending.wait()), running],
            timeout=120,
            return_when=asyncio.FIRST_COMPLETED,
        )
        starts_ns = time.monotonic_ns()
        await asyncio.sleep(SETTLE_S)
        before = [_cpu_ns(s.process.pid) for s in servers]
        opened = time.monotonic_ns()
        await asyncio.sleep(WINDOW_S)
        after = [_cpu_ns(s.process.pid) for s in servers]
        closed = time.monotonic_ns()
        await running
    result.wall_s = (time.monotonic_ns() - begun_ns) / 1e9
    result.starts_s = (starts_ns - begun_ns) / 1e9
    result.window_cpu_ms = [(a - b) / 1e6 for a, b in zip(after, before, strict=True)]
    result.window_chunks = [0] * len(servers)
    latencies = []
    failures: Counter = Counter()
    for c in clients:
        if c.outcome:
            failures[c.outcome] += 1
        else:
            result.completed += 1
        latencies += [ms for at, ms in c.samples if at >= starts_ns]
        result.window_chunks[c.server] += sum(1 for at, _ in c.samples if opened <= at < closed)
    result.failures = dict(failures.most_common(4))
    result.chunks_after_starts = len(latencies)
    if latencies:
        result.p99_ms, result.p50_ms = percentile(latencies, 99), percentile(latencies, 50)
    result.rss_mib = [s.memory_kib()["VmHWM"] / 1024 for s in servers]
    return result


def _cpu_ns(pid: int) -> int:
    """The process's CPU time (ns, /proc's 10 ms ticks), read from outside it: asking the
    server itself would wait behind the chunks it is busy with. Over the window's seconds
    of CPU the ticks are within 1%."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def pg_connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


class _ConnectionWatch(threading.Thread):
    """Counts the database's open connections (but its own) every 100 ms, from outside the
    servers, until stopped; `peak()` is the most since the last call."""

    def __init__(self, database_url: str) -> None:
        super().__init__(daemon=True)
        self.database = urlsplit(database_url).path.lstrip("/")
        self.connection = pg_connect(database_url)
        self.allowed = int(self.connection.execute("SHOW max_connections").fetchone()[0])
        self.stopped = threading.Event()
        self.most = 0

    def run(self) -> None:
        with self.connection:
            while not self.stopped.wait(0.1):
                count = self.connection.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.database],
                ).fetchone()[0]
                self.most = max(self.most, count)

    def peak(self) -> int:
        most, self.most = self.most, 0
        return most


def child_main(database_url: str, streams: int, provider_url: str = "") -> None:
    """In a process whose Django is set up on the bench's PostgreSQL database and Redis:
    the one-process level, then the two-process level; their result as JSON. On the fake
    provider at `provider_url` (the bench's), or on one of its own."""
    import resource

    from .provider import provider_start
    from .server import server_start

    scratch = env.scratch_dir()
    env.setup(scratch)
    environ = env.bench_environ(scratch)
    provider = None if provider_url else provider_start(environ)
    provider_url = provider_url or provider.base_url
    result = ScaleOutResult(fd_limit=resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    watch = _ConnectionWatch(database_url)
    result.connections_allowed = watch.allowed
    servers = []
    try:
        fixtures = env.fixtures_create()
        project = env.project_new("scale out")
        warm = env.rojo_new("scale-warm", provider_url, f"paced-{CHUNKS}-{DELAY_MS}")
        log = scratch / "scale_out.log"
        targets = []
        watch.start()
        for label, count, n in (("one", streams // PROCESSES, 1), ("two", streams, PROCESSES)):
            while len(servers) < n:  # the second process starts after the first level
                servers.append(server_start(environ, log))
                target = http.Target(
                    "127.0.0.1", servers[-1].port, fixtures.session_key, fixtures.csrf_token
                )
                asyncio.run(http.chat(target, project.pk, warm.slug, "Warm up."))
                targets.append(target)
            scenario = f"paced-{CHUNKS}-{DELAY_MS}-together-{count}"
            rojo = env.rojo_new(f"scale-{count}", provider_url, scenario)
            print(f"{count} streams on {n} process(es)…", file=sys.stderr, flush=True)
            watch.peak()  # the level's own peak, from its first request
            run = asyncio.run(_run(servers[:n], targets[:n], project.pk, rojo.slug, count))
            run.connections_max = watch.peak()
            setattr(result, label, run)
    except Exception as exc:
        result.error = f"{exc.__class__.__name__}: {exc}"
        logs = (scratch / "scale_out.log").read_text()[-2000:] if servers else ""
        result.error += f"; the servers' log: {logs}" if logs else ""
    finally:
        watch.stopped.set()
        if watch.is_alive():
            watch.join()
        else:
            watch.connection.close()
        for server in servers:
            server.stop()
        if provider:
            provider.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(asdict(result)), flush=True)


def _redis_clear(redis_url: str) -> None:
    """Delete every key of the bench's own Redis database (never another's)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(count=1000))
        for begin in range(0, len(keys), 1000):
            client.delete(*keys[begin : begin + 1000])
    finally:
        client.close()


def scale_out_unavailable(server_url: str, redis_url: str) -> str:
    """Why the section cannot run on these servers ('' if it can): a server that does not
    answer, or a Redis database that already holds keys (the bench deletes every key of its
    database afterwards, so it runs only on an empty one)."""
    import redis

    try:
        pg_connect(server_url).close()
    except Exception as exc:
        return f"no PostgreSQL at BENCH_POSTGRES_URL ({type(exc).__name__})"
    client = redis.Redis.from_url(redis_url, socket_timeout=2)
    try:
        if client.dbsize():
            return "BENCH_REDIS_URL's database holds keys; name an empty one"
    except redis.RedisError as exc:
        return f"no Redis at BENCH_REDIS_URL ({type(exc).__name__})"
    finally:
        client.close()
    return ""


def scale_out(
    server_url: str, redis_url: str, streams: int = STREAMS, provider_url: str = ""
) -> ScaleOutResult:
    """Create a database, run the child on it and Redis (and on the fake provider at
    `provider_url`, if given), drop the database and the keys."""
    name = f"rojo_bench_scale_{os.getpid()}"
    database_url = urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    with pg_connect(server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    _redis_clear(redis_url)
    try:
        child = subprocess.run(
            [sys.executable, "-m", "bench.scale_out", "--child", database_url, str(streams)]
            + ([provider_url] if provider_url else []),
            env={**os.environ, "BENCH_DATABASE_URL": database_url, "REDIS_URL": redis_url},
            cwd=env.ROOT,
            stdout=subprocess.PIPE,
            text=True,
            timeout=600,
        )
        lines = child.stdout.strip().splitlines()
        if child.returncode != 0 or not lines:
            return ScaleOutResult(error=f"the run failed ({child.returncode}): {lines[-3:]}")
        fields = json.loads(lines[-1])
        runs = {k: RunResult(**fields.pop(k)) if fields[k] else None for k in ("one", "two")}
        return ScaleOutResult(**fields, **runs)
    finally:
        with pg_connect(server_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _redis_clear(redis_url)


def scale_out_section(r: ScaleOutResult | None, why: str = "") -> Section:
    section = Section(
        "12. 1,000 streams on one machine",
        "The scale-out layout of docs/operations.md on one host: "
        f"{PROCESSES} server processes (uvicorn, a port each) on one PostgreSQL database "
        "(a fresh one) and one Redis, the client "
        "spreading the conversations over them in turn. Each conversation is a reply of "
        f"{CHUNKS} stamped chunks paced {DELAY_MS} ms apart, all streaming at once. Chunk "
        "latency counts the chunks that arrived once every stream had its first one. CPU "
        f"per chunk: each process's CPU over a {WINDOW_S:g} s window of the steady state, "
        "over the chunks it delivered meanwhile; the one-process figure is the same load "
        "per process (half the streams on one process), in the same run. The one-process "
        "level is also the bench's 500 conversations at once on PostgreSQL (section 3 runs "
        "SQLite's): its completions and the connections it held at most.",
    )
    if r is None:
        section.add(
            "scale_out",
            "not run",
            note=why or "set BENCH_POSTGRES_URL and BENCH_REDIS_URL to run it",
        )
        return section
    if r.error or r.two is None or r.one is None:
        section.add("scale_out", "failed", "runs", False, r.error[:1500])
        return section
    one, two = r.one, r.two
    for run in (one, two):
        failures = ", ".join(f"{n} x {what}" for what, n in run.failures.items())
        section.add(
            f"scale_out_{run.streams}_on_{run.processes}_completed",
            f"{run.completed}/{run.streams}",
            "all",
            run.completed == run.streams,
            f"starts {run.starts_s:.1f} s, wall {run.wall_s:.1f} s, peak RSS "
            + " + ".join(f"{m:.0f}" for m in run.rss_mib)
            + " MiB"
            + (f"; {failures}" if failures else ""),
        )
    section.add(
        f"scale_out_{two.streams}_p99_after_starts",
        f"{two.p99_ms:.1f} ms",
        f"≤ {P99_MS_MAX:g} ms",
        two.p99_ms <= P99_MS_MAX and two.chunks_after_starts > 0,
        f"p50 {two.p50_ms:.1f} ms, {two.chunks_after_starts} chunks; on one process at "
        f"{one.streams}: p99 {one.p99_ms:.1f} ms",
    )
    base = one.cpu_per_chunk_us[0]
    worst = max(two.cpu_per_chunk_us)
    section.add(
        "scale_out_cpu_per_chunk_vs_one_process",
        f"{worst / base:.2f}x",
        f"≤ {CPU_RATIO_MAX:g}x",
        worst / base <= CPU_RATIO_MAX,
        "per process "
        + ", ".join(
            f"{us:.0f} µs ({chunks} chunks)"
            for us, chunks in zip(two.cpu_per_chunk_us, two.window_chunks, strict=True)
        )
        + f"; one process {base:.0f} µs ({one.window_chunks[0]} chunks)",
    )
    for run in (one, two):
        most = CONNECTIONS_MAX * run.processes
        section.add(
            f"postgresql_connections_open_max_{run.streams}_on_{run.processes}",
            str(run.connections_max),
            f"≤ {most}",
            0 < run.connections_max <= most,
            f"PostgreSQL allows {r.connections_allowed}; open files allowed {r.fd_limit}",
        )
    section.notes.extend(NOTES)
    return section


NOTES = (
    "Limits, per process: PostgreSQL connections at most ROJO_DB_POOL_SIZE (10; the two "
    "processes and the bench's own stay far under max_connections 100), Redis connections "
    "of the Channels layer at most ROJO_REDIS_POOL_SIZE (50), open files 2 per stream "
    "(the client's and the provider's connection) under the 20,000 allowed.",
    "What failed before (the scale22 helper's first run): redis-py 8's asyncio pool holds "
    "at most 100 connections and fails the next command at once (MaxConnectionsError, a "
    "RedisError); each turn start joins its group on the layer, so a burst of 500 had "
    "218 answered 503 'cannot reach its message relay', and with fewer requests than the "
    "provider's barrier waited for, the other 282 ended in ERROR provider (no stream "
    "ever ended without an ERROR or DONE: every client had its answer). The layer's pool "
    "now queues commands past its size (roject/server/channel_layer.py): 500/500 and "
    "1,000/1,000 complete. Streams counted by CHAT events looked cut short when a "
    "follower fell 32 chunks behind (the log then sends the rest of the run as one "
    "event): the bench counts the chunks' stamps, and asks for DONE.",
    "What holds `scale_out_1000_p99_after_starts`: 1,000 streams of a chunk every 100 "
    "ms are 10,000 chunks a second, 5,000 per process; at the CPU per chunk in the "
    "table (86 to 156 µs in the first run of 4 December 2026, on a faster host) 0.43 to "
    "0.78 of a core per process, on a machine of 2 cores that also runs the client "
    "(which parses every SSE event of the 1,000 streams) and the provider (which writes "
    "them): the four processes need more than the 2 cores, so chunks queue. One process "
    "at 500 misses it for the same reason. The target needs the client and the provider "
    "off this machine, or fewer chunks a second. Saturated so, each process also pays "
    "more per chunk than the one process does (`scale_out_cpu_per_chunk_vs_one_process`:"
    " 0.87x in the first run, 2.27x in the second, on a host about 1.5 times slower): "
    "the ratio holds only while the cores have room.",
    "The latency and CPU targets need an idle machine: with the client, the provider and "
    "both servers on the same 2 cores beside other sessions (load 7 to 10), the first "
    "runs had every stream's first chunk after 15 s (500 on one process) and 23 s (1,000 "
    "on two), and the servers 2.5 s behind (p50) once they streamed.",
)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=STREAMS)
    parser.add_argument("--child", nargs="+", metavar="DATABASE_URL STREAMS [PROVIDER_URL]")
    args = parser.parse_args()
    if args.child:
        child_main(args.child[0], int(args.child[1]), *args.child[2:])
        return
    server_url, redis_url = os.environ["BENCH_POSTGRES_URL"], os.environ["BENCH_REDIS_URL"]
    scale_out_section(scale_out(server_url, redis_url, args.streams))


if __name__ == "__main__":
    main()
