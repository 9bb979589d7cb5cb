"""3b. Concurrency on PostgreSQL, the multi-process setup's database.

With BENCH_POSTGRES_URL naming a PostgreSQL server on which the bench may create a database
(e.g. postgres://postgres@127.0.0.1:5432/postgres), the concurrency benchmark runs once more
with the server on a fresh database there, which is dropped afterwards. It runs in a child
process (`python -m bench.postgres`) whose Django is set up on that database, and reports
how many connections the database had open at most meanwhile, next to what it allows: a
server holding one per streaming reply would run out (README, "Running at scale").
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit, urlunsplit

from . import env

CONVERSATIONS = 500


@dataclass
class PostgresResult:
    conversations: int
    completed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    connections_max: int = 0
    connections_allowed: int = 0
    error: str = ""


def _connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def postgres_concurrency(server_url: str, conversations: int = CONVERSATIONS) -> PostgresResult:
    """Create a database, run the child on it, drop it; the child's result."""
    name = f"rojo_bench_{os.getpid()}"
    parts = urlsplit(server_url)
    database_url = urlunsplit(parts._replace(path=f"/{name}"))
    with _connect(server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        child = subprocess.run(
            [sys.executable, "-m", "bench.postgres", database_url, str(conversations)],
            env={**os.environ, "BENCH_DATABASE_URL": database_url},
            cwd=env.ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if child.returncode != 0:
            tail = (child.stderr or child.stdout)[-2000:]
            return PostgresResult(conversations, error=f"the run failed: {tail}")
        return PostgresResult(**json.loads(child.stdout.strip().splitlines()[-1]))
    finally:
        with _connect(server_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _watch_connections(database_url: str, result, stop: threading.Event) -> None:
    """Until `stop`: the most connections open on the database at once, into `result`'s
    connections_max (and what PostgreSQL allows into connections_allowed)."""
    name = urlsplit(database_url).path.lstrip("/")
    with _connect(database_url) as watcher:
        result.connections_allowed = int(watcher.execute("SHOW max_connections").fetchone()[0])
        while not stop.wait(0.1):
            count = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            ).fetchone()[0]
            result.connections_max = max(result.connections_max, count)


def main(database_url: str, conversations: int) -> None:
    from .concurrency import concurrency
    from .run import Bench

    scratch = env.scratch_dir()
    env.setup(scratch)
    bench = Bench(scratch, quick=True)
    result = PostgresResult(conversations)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_connections, args=(database_url, result, stop))
    try:
        server = bench._server()
        watcher.start()
        run = asyncio.run(
            concurrency(
                server,
                bench.target,
                bench.streams_project.pk,
                "tool-paced",
                conversations=conversations,
            )
        )
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        bench.close()
        shutil.rmtree(scratch, ignore_errors=True)
    result.completed, result.wall_s = run.completed, run.wall_s
    result.failures = dict(run.failures.most_common(3))
    print(json.dumps(asdict(result)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
