"""Run every benchmark, print each figure against its target, and write docs/performance.md.

Usage: `make bench` (or `.venv/bin/python -m bench.run`). `--runs` sets the interleaved runs
of the loop-overhead benchmark (default 12); `--quick` is a smoke run that writes no report;
`--long` also runs the sections that take minutes each (LONG), whose figures the report
otherwise keeps from their own last run.
With BENCH_PROFILE=<path>, each server process samples where its CPU goes and writes the
result to <path>.<pid> when it stops (see bench/sampler.py). With BENCH_BASELINE_TREE=<a
checkout of an earlier commit>, section 10's burst of turn starts also runs on that tree's
server, in the same run, for a before-and-after on the same machine and load. With
BENCH_POSTGRES_URL and BENCH_REDIS_URL both set, section 12 runs two server processes on them
(bench/scale_out.py).
"""

import argparse
import asyncio
import os
import shutil
import time
from pathlib import Path

from . import env
from .report import Section, load, machine, markdown, now, section_carried, section_replaced
from .sections_scale import (
    big_files_section,
    concurrency_section,
    queries_section,
)
from .sections_stream import MANY_STREAMS, latency_section, loop_section
from .sections_window import window_section
from .starts import BURST_MODEL, PACED_MODEL, RUNNING_MODEL
from .steady import steady_model

REPORT = env.ROOT / "docs" / "performance.md"

# The sections after the first two, in the report's order.
RUN = (
    *("concurrency", "big_files", "database", "window", "conversations", "slow_clients"),
    *("sqlite_memory", "floor", "stream_memory", "scale_out", "backup_memory", "instructions"),
)
# Sections that take minutes each: run with --long (or --only); otherwise the report keeps
# their last figures. Section 8 is issue #17's ten clients that never read, on two servers
# (about 3 minutes: a million chunks each); section 9 its 8-minute search for a leak.
LONG = {
    "slow_clients": (8, "`python -m bench.run --only slow_clients`, about 3 minutes"),
    "sqlite_memory": (9, "`python -m bench.run --only sqlite_memory`, about 8 minutes"),
    # Issue #34's 1 GiB storage backed up and restored (3 GiB of scratch disk).
    "backup_memory": (13, "`python -m bench.run --only backup_memory`, about 3 minutes"),
    # Issue #38's instructions per chunk, counted under valgrind: load-independent.
    "instructions": (14, "`python -m bench.run --only instructions`, about 2 minutes"),
}

# Conversations at once, each level on a fresh server process. More at once: section 11
# (1,000 on SQLite) and section 12 (500 on one process on PostgreSQL, then 1,000 on two).
CONCURRENCY = (200,)


async def _loop_and_latency(world, stories: dict, runs: int, project_id: int):
    import openai

    from .latency import latency
    from .loop_overhead import loop_overhead

    loop = {}
    url = world.rojo.base_url
    async with openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0) as sdk:
        for pace, rojo in stories.items():
            world.sdk, world.rojo = sdk, rojo
            loop[pace] = await loop_overhead(world, runs=runs)
    latencies = [
        await latency(world.server, world.target, project_id, "paced-1", streams=1, rounds=8),
        await latency(world.server, world.target, project_id, "paced-50", streams=50),
        await latency(world.server, world.target, project_id, "paced-200", streams=MANY_STREAMS),
    ]
    return loop, latencies


class Bench:
    """The provider, the servers and the fixtures of one run, and the benchmarks on them."""

    def __init__(self, scratch: Path, *, quick: bool) -> None:
        from .provider import provider_start

        self.quick = quick
        self.environ = env.bench_environ(scratch)
        self.log = scratch / "server.log"
        self.servers = []
        self.provider = provider_start(self.environ)
        try:
            self._fixtures_create()
        except BaseException:
            self.provider.stop()
            raise

    def _fixtures_create(self) -> None:
        from django.contrib.auth import get_user_model

        from . import client as http

        fixtures = self.fixtures = env.fixtures_create()
        self.user = get_user_model().objects.get(pk=fixtures.user_id)
        self.target = http.Target("127.0.0.1", 0, fixtures.session_key, fixtures.csrf_token)
        url = self.provider.base_url
        self.stories = {
            "instant": env.rojo_new("story", url, "story"),
            "paced": env.rojo_new("paced-story", url, "story-0-1"),
        }
        env.rojo_new("paced-1", url, "paced-50-20")
        env.rojo_new("paced-50", url, "paced-50-20-together-50")
        env.rojo_new("paced-200", url, f"paced-100-20-together-{MANY_STREAMS}")
        env.rojo_new("tool-paced", url, "tool-paced-100-20")
        env.rojo_new(RUNNING_MODEL, url, RUNNING_MODEL)
        env.rojo_new(PACED_MODEL, url, PACED_MODEL)
        env.rojo_new(BURST_MODEL, url, BURST_MODEL)
        for streams in (50, MANY_STREAMS):  # bench/steady.py's, quick and full
            env.rojo_new(steady_model(streams), url, steady_model(streams))
        self.streams_project = env.project_new("streams")
        self.raw: dict = {}  # sections 1 to 3's results, for the floor's ratios

    def _server(self, tree: Path | None = None):
        from .server import server_start

        self.servers.append(server_start(self.environ, self.log, tree))
        self.target.port = self.servers[-1].port
        return self.servers[-1]

    def _server_stop(self) -> None:
        self.servers.pop().stop()

    def loop_and_latency(self, runs: int) -> list[Section]:
        from .loop_overhead import World

        world = World(
            sdk=None,
            rojo=self.stories["instant"],
            user=self.user,
            target=self.target,
            server=self._server(),
        )
        loop, latencies = asyncio.run(
            _loop_and_latency(world, self.stories, runs, self.streams_project.pk)
        )
        self._server_stop()
        self.raw.update(loop=loop, latencies=latencies)
        print("\n# 1. Loop overhead", flush=True)
        loop_figures = loop_section(loop)
        print("\n# 2. Streaming latency", flush=True)
        return [loop_figures, latency_section(latencies)]

    def concurrency(self) -> Section:
        from .concurrency import concurrency

        print("\n# 3. Concurrency", flush=True)
        results = []
        for conversations in (50,) if self.quick else CONCURRENCY:
            server = self._server()
            project_id = self.streams_project.pk
            results.append(
                asyncio.run(
                    concurrency(
                        server, self.target, project_id, "tool-paced", conversations=conversations
                    )
                )
            )
            self._server_stop()
        self.raw["concurrency"] = results
        return concurrency_section(results)

    def big_files(self) -> Section:
        from django.conf import settings

        from roject.storage import project_root

        from .big_files import big_files

        print("\n# 4. Big files", flush=True)
        project = env.project_new("big files")
        costs = big_files(project.pk, project_root(project.pk))
        return big_files_section(costs, settings.ROJO_MAX_READ_BYTES)

    def database(self) -> Section:
        from .queries import queries_per_step

        print("\n# 5. Database", flush=True)
        story = self.stories["instant"]
        return queries_section([queries_per_step(story, self.user, prior=n) for n in (2, 50)])

    def window(self) -> Section:
        from .compaction import build_cost, session_cost

        print("\n# 6. Context window", flush=True)
        rojo = env.rojo_new("window", self.provider.base_url, "story", context_window=12_000)
        builds = [
            build_cost(rojo, self.user, 50, summary=False),
            build_cost(rojo, self.user, 500, summary=False),
            build_cost(rojo, self.user, 500, summary=True),
        ]
        return window_section(builds, [session_cost(self.user, turns) for turns in (25, 50)])

    def conversations(self) -> Section:
        from .conversations import conversations_bench, conversations_section

        print("\n# 7. Conversations", flush=True)
        return conversations_section(conversations_bench(self.user))

    def slow_clients(self) -> Section:
        from .slow_clients import slow_clients_all, slow_clients_section

        print("\n# 8. Slow clients", flush=True)
        return slow_clients_section(
            slow_clients_all(self.environ, self.provider.base_url, self.log.parent, self.fixtures)
        )

    def sqlite_memory(self) -> Section:
        from .sqlite_memory import DURATION, sqlite_memory_all, sqlite_memory_section

        print("\n# 9. Memory on SQLite under sustained load", flush=True)
        seconds = 30 if self.quick else DURATION
        results = sqlite_memory_all(
            self.environ, self.provider.base_url, self.log.parent, self.fixtures, seconds
        )
        return sqlite_memory_section(results, seconds)

    def backup_memory(self) -> Section:
        from .backup_memory import backup_memory_section, measure

        print("\n# 13. Backup and restore memory", flush=True)
        return backup_memory_section(measure(1), measure(64 if self.quick else 1024))

    def instructions(self) -> Section:
        from .instructions import instructions_count, instructions_section

        print("\n# 14. Instructions per chunk", flush=True)
        world = (self.environ, self.log.parent, self.fixtures)
        return instructions_section(instructions_count(*world, rounds=1 if self.quick else 3))

    def stream_memory(self) -> Section:
        from .stream_memory import STREAMS, stream_memory_all, stream_memory_section

        print("\n# 11. Memory per stream", flush=True)
        levels = (50,) if self.quick else STREAMS
        args = (self.environ, self.provider.base_url, self.log.parent, self.fixtures, levels)
        return stream_memory_section(stream_memory_all(*args))

    def scale_out(self) -> Section:
        """Section 12: with BENCH_POSTGRES_URL and BENCH_REDIS_URL, two processes on them."""
        from .scale_out import scale_out, scale_out_section, scale_out_unavailable

        print("\n# 12. 1,000 streams on one machine", flush=True)
        server_url = os.environ.get("BENCH_POSTGRES_URL")
        redis_url = os.environ.get("BENCH_REDIS_URL")
        if not (server_url and redis_url) or self.quick:
            return scale_out_section(None)
        if why := scale_out_unavailable(server_url, redis_url):
            return scale_out_section(None, why)
        return scale_out_section(
            scale_out(server_url, redis_url, provider_url=self.provider.base_url)
        )

    def floor(self) -> Section:
        """Section 10: the floor beside the app, and the burst of turn starts on both (and
        on BENCH_BASELINE_TREE's server, when set)."""
        from .floor import floor_start
        from .sections_floor import app_figures, floor_section
        from .starts import app_opener, burst, floor_figures, floor_opener, paced_pair
        from .steady import steady_per_chunk

        print("\n# 10. Against the floor, and turn starts", flush=True)
        floor = floor_start(self.environ, self.provider.base_url, self.log)
        try:
            figures = asyncio.run(floor_figures(floor, 50 if self.quick else 200))
            app = app_figures(self.raw["loop"], self.raw["concurrency"], self.raw["latencies"])
            baseline = os.environ.get("BENCH_BASELINE_TREE")
            trees = {"before": Path(baseline)} if baseline else {}
            for label, tree in {**trees, "app": None}.items():
                server = self._server(tree)
                opener = app_opener(self.target, self.streams_project.pk)
                if label == "app":
                    streams = 50 if self.quick else MANY_STREAMS
                    steady = asyncio.run(steady_per_chunk(server, opener, streams=streams))
                    app["per_chunk_us"] = steady.per_chunk_us
                    # The floor, idle meanwhile, streams beside the app (paced_pair).
                    app["paced_cpu_ms"], figures.paced_cpu_ms = asyncio.run(
                        paced_pair(server, opener, floor, floor_opener(floor))
                    )
                app["bursts"][label] = asyncio.run(burst(server, opener))
                self._server_stop()
        finally:
            floor.stop()
        return floor_section(figures, app)

    def timed(self, name: str, run):
        """Run one section (or two), printing how long it took: `make bench` has 6 minutes."""
        clock = time.monotonic()
        try:
            return run()
        finally:
            print(f"[{name} took {time.monotonic() - clock:.0f} s]", flush=True)

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        self.provider.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # 12: the medians move less between runs of 12 than between runs of the bench (their
    # load); 24 cost 36 s more of the 6 minutes.
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help="a smoke run; no report written")
    parser.add_argument(
        "--long",
        action="store_true",
        help="also the sections that take minutes each (their figures are otherwise kept)",
    )
    parser.add_argument(
        "--only",
        choices=[
            *("database", "window", "conversations", "slow_clients", "sqlite_memory"),
            *("stream_memory", "scale_out", "backup_memory", "instructions"),
        ],
        help="run one section and replace it in docs/performance.md (the rest stays)",
    )
    args = parser.parse_args(argv)
    started, clock, load_before = now(), time.monotonic(), load()
    scratch = env.scratch_dir()
    env.setup(scratch)
    bench = None
    try:
        bench = Bench(scratch, quick=args.quick)
        if args.only:
            section = getattr(bench, args.only)()
            if not args.quick:
                REPORT.write_text(section_replaced(REPORT.read_text(), section))
                print(f"replaced its section in {REPORT.relative_to(env.ROOT)}")
            return
        print("\n# 1. Loop overhead, 2. Streaming latency (running)", flush=True)
        runs = 3 if args.quick else args.runs
        sections = bench.timed("1-2", lambda: bench.loop_and_latency(runs))
        for name in RUN:
            if name in LONG and not args.long:
                continue
            sections.append(bench.timed(name, getattr(bench, name)))
    except BaseException:
        log = scratch / "server.log"
        if log.exists():
            print(f"\nthe server's log:\n{log.read_text()[-3000:]}")
        raise
    finally:
        if bench is not None:
            bench.close()
        shutil.rmtree(scratch, ignore_errors=True)
    took = time.monotonic() - clock
    missed = [f.name for s in sections for f in s.figures if f.met is False]
    print(f"\n{len(missed)} targets missed" + (f": {', '.join(missed)}" if missed else ""))
    print(f"took {took:.0f} s")
    if not args.quick:
        REPORT.parent.mkdir(exist_ok=True)
        earlier = REPORT.read_text() if REPORT.exists() else ""
        report = markdown(sections, machine(load_before), started, took)
        if not args.long:
            for number, how in LONG.values():
                report = section_carried(report, earlier, number, how)
        REPORT.write_text(report)
        print(f"wrote {REPORT.relative_to(env.ROOT)}")


if __name__ == "__main__":
    main()
