"""Server CPU per chunk at 200 streams, the app beside the floor: section 10's figure on its own.

`python -m bench.per_chunk [--rounds N] [--baseline TREE] [--servers uvicorn,daphne,...]`
runs, in one standalone world, N rounds of 200 paced streams at once through the floor and
through each server (BENCH_SERVER's values, `uvicorn` the default; with --baseline, also
that checkout's, on the first server named), interleaved round by round so that a change of
load on the shared machine falls on all alike; the figure is bench/steady.py's, CPU per
chunk once all streams have started. It prints each one's median, its ratio to the floor's,
and the load average: before/after pairs of a change to the per-chunk path (issue #22).
"""

import argparse
import asyncio
import os
import time
from pathlib import Path

from . import client as http
from .env import project_new, rojo_new, standalone_world
from .report import load
from .starts import app_opener, floor_opener
from .stats import median
from .steady import STEADY_MODEL, steady_per_chunk


async def _round(server, opener) -> float:
    return (await steady_per_chunk(server, opener)).per_chunk_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--servers", default="uvicorn", help="BENCH_SERVER values, by commas")
    parser.add_argument("--baseline", type=Path, help="a checkout of the tree before a change")
    args = parser.parse_args()
    from .floor import floor_start
    from .server import server_start

    with standalone_world() as (environ, provider, scratch, fixtures):
        rojo_new(STEADY_MODEL, provider.base_url, STEADY_MODEL)
        project_id = project_new("streams").pk
        target = http.Target("127.0.0.1", 0, fixtures.session_key, fixtures.csrf_token)
        log = scratch / "server.log"
        floor = floor_start(environ, provider.base_url, log)
        servers = {}
        try:
            names = args.servers.split(",")
            if args.baseline:  # on the first of the servers
                baseline_environ = {**environ, "BENCH_SERVER": names[0]}
                servers["baseline"] = server_start(baseline_environ, log, args.baseline)
            for name in names:
                servers[name] = server_start({**environ, "BENCH_SERVER": name}, log)
            figures: dict[str, list[float]] = {"floor": [], **{name: [] for name in servers}}
            loads = [load()]
            for _ in range(args.rounds + 1):  # the first round warms each up, uncounted
                figures["floor"].append(asyncio.run(_round(floor, floor_opener(floor))))
                for name, server in servers.items():
                    target.port = server.port
                    opener = app_opener(target, project_id)
                    figures[name].append(asyncio.run(_round(server, opener)))
                loads.append(load())
            floor_us = median(figures["floor"][1:])
            print(f"load {loads[0]} before, {loads[-1]} after; rounds {args.rounds}")
            for name, values in figures.items():
                us = median(values[1:])
                shown = ", ".join(f"{v:.1f}" for v in values[1:])
                print(f"{name:>12}: {us:6.1f} µs/chunk  {us / floor_us:4.2f}x floor  ({shown})")
        finally:
            floor.stop()
            for server in servers.values():
                server.stop()
            time.sleep(0.1)
            if os.environ.get("BENCH_KEEP_LOG"):
                print(log.read_text()[-3000:])


if __name__ == "__main__":
    main()
