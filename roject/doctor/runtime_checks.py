"""Checks that touch what the install runs on: the storage directory (what the gate needs of
its file system, and that every process sees the same one), the database, Redis, the clock,
and the OIDC provider."""

import fcntl
import os
import tempfile
import time
import uuid

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.utils.translation import ngettext
from redis.exceptions import RedisError

from . import Context, Finding, check
from .database_fixes import SERVER_FIX, database_fix

MARKER = ".rojo-storage-marker"
MARKER_KEY = "rojo:doctor:storage-marker"
# How long Redis keeps the marker past the last process that agreed with it.
MARKER_SECONDS = 3600
# Key prefixes of Rojo's own in its Redis database: the channel layers' and the cache's.
OWN_PREFIXES = (b"asgi", b"rojo")
CLOCK_SKEW_SECONDS = 5
NETWORK_SECONDS = 2.0


def _storage_problem(root) -> str | None:
    """What the storage gate needs, tried: a file made and written, locked, renamed over
    another atomically, and a link refused beneath the root (openat2 or the fallback)."""
    try:
        os.makedirs(root, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=".doctor-") as work:
            first = os.path.join(work, "a")
            second = os.path.join(work, "b")
            for path in (first, second):
                with open(path, "wb") as handle:
                    handle.write(b"rojo")
                    handle.flush()
                    os.fsync(handle.fileno())
            with open(first, "rb") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
            os.replace(first, second)
            if os.path.exists(first):
                return "a rename left its source behind"
    except OSError as exc:
        return f"{exc.strerror or type(exc).__name__} ({type(exc).__name__})"
    return None


@check("runtime")
def storage(context: Context) -> list[Finding]:
    problem = _storage_problem(settings.ROJO_STORAGE_DIR)
    if problem is None:
        return []
    return [
        Finding(
            level="error",
            code="storage",
            message=f"the storage directory (ROJO_STORAGE_DIR) does not take files, locks "
            f"and renames: {problem}.",
            fix="point ROJO_STORAGE_DIR at a writable local or NFSv4 directory with locks "
            "(one volume shared by every process).",
        )
    ]


def _redis_client():
    from redis import Redis

    return Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=NETWORK_SECONDS, socket_timeout=NETWORK_SECONDS
    )


@check("runtime")
def storage_shared(context: Context) -> list[Finding]:
    """A marker in the storage, and the same in Redis: a process that finds Redis's marker
    missing from its storage sees another storage than the others."""
    if not settings.REDIS_URL or _storage_problem(settings.ROJO_STORAGE_DIR):
        return []
    path = os.path.join(settings.ROJO_STORAGE_DIR, MARKER)
    try:
        with open(path, "x") as handle:
            handle.write(uuid.uuid4().hex)
    except FileExistsError:
        pass
    with open(path) as handle:
        mine = handle.read().strip()
    try:
        client = _redis_client()
        client.set(MARKER_KEY, mine, nx=True, ex=MARKER_SECONDS)
        shared = client.get(MARKER_KEY)
        if shared is None or shared.decode() == mine:
            client.expire(MARKER_KEY, MARKER_SECONDS)  # kept while processes agree
            return []
    except (RedisError, OSError):
        return []  # the Redis check says so
    return [
        Finding(
            level="warning",
            code="storage-not-shared",
            message="this process's storage directory is not the one other processes used "
            "within the hour: files written through one are missing in the others (or the "
            "storage was replaced, which this warning then outlives by up to an hour).",
            fix="mount one shared volume at ROJO_STORAGE_DIR in every container.",
        )
    ]


@check("runtime")
def database(context: Context) -> list[Finding]:
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        found = []
        if pending:
            found.append(
                Finding(
                    level="error",
                    code="database-migrations",
                    message=ngettext(
                        "%(n)d migration is not applied.",
                        "%(n)d migrations are not applied.",
                        len(pending),
                    )
                    % {"n": len(pending)},
                    fix="run manage.py migrate (the image does at start).",
                )
            )
        if connection.vendor == "postgresql":
            found.extend(_postgresql(context))
        return found
    except DatabaseError as exc:
        return [
            Finding(
                level="error",
                code="database",
                message=f"the database does not answer: {_database_reason(exc)}.",
                fix=database_fix(exc) or SERVER_FIX,
            )
        ]
    finally:
        connection.close()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{lines[0].rstrip('.')} ({type(exc).__name__})" if lines else type(exc).__name__


def _database_reason(exc: DatabaseError) -> str:
    """Why the database did not answer. PostgreSQL's pool says only that it got no connection
    within its wait: one connection of its own, bounded as the doctor's, says why (no such
    database, refused, a name that does not resolve). libpq's messages hold no password."""
    if connection.vendor != "postgresql":
        return _first_line(exc)
    import psycopg

    params = connection.settings_dict
    try:
        psycopg.connect(
            dbname=params["NAME"] or None,
            user=params["USER"] or None,
            password=params["PASSWORD"] or None,
            host=params["HOST"] or None,
            port=params["PORT"] or None,
            connect_timeout=max(1, int(NETWORK_SECONDS)),
        ).close()
    except psycopg.Error as direct:
        return _first_line(direct)
    return _first_line(exc)


def _postgresql(context: Context) -> list[Finding]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('max_connections')::int, now()")
        allowed, now = cursor.fetchone()
    found = []
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size", 10)
    processes = max(context.processes, 1)
    needed = processes * pool + 3  # the pools, and a few for migrate, the admin's psql, …
    if needed > allowed:
        found.append(
            Finding(
                level="error",
                code="database-connections",
                message=f"{processes} processes x ROJO_DB_POOL_SIZE {pool} need {needed} "
                f"connections; PostgreSQL allows {allowed}.",
                fix="lower ROJO_DB_POOL_SIZE or raise max_connections in postgresql.conf.",
            )
        )
    skew = abs(now.timestamp() - time.time())
    if skew > CLOCK_SKEW_SECONDS:
        found.append(_clock(f"{skew:.0f} s from the database server's"))
    return found


def _clock(difference: str) -> Finding:
    return Finding(
        level="warning",
        code="clock",
        message=f"this machine's clock is {difference}: turns' heartbeats and token "
        "expiry compare times across machines.",
        fix="run NTP (chrony, systemd-timesyncd) on every host.",
    )


@check("runtime")
def redis(context: Context) -> list[Finding]:
    if not settings.REDIS_URL:
        return []
    try:
        client = _redis_client()
        seconds, micros = client.time()
        foreign = [key for key in client.scan_iter(count=500) if not key.startswith(OWN_PREFIXES)][
            :3
        ]
    except (RedisError, OSError) as exc:
        return [
            Finding(
                level="error",
                code="redis",
                message=f"Redis (REDIS_URL) does not answer: {_first_line(exc)}.",
                fix="check REDIS_URL and that Redis runs and is reachable from every process.",
            )
        ]
    found = []
    if foreign:
        found.append(
            Finding(
                level="warning",
                code="redis-shared",
                message="Redis's database holds keys of another application "
                f"({', '.join(repr(key.decode(errors='replace')) for key in foreign)}).",
                fix="give Rojo a database of its own (redis://host:6379/N with another N).",
            )
        )
    skew = abs(seconds + micros / 1e6 - time.time())
    if skew > CLOCK_SKEW_SECONDS:
        found.append(_clock(f"{skew:.0f} s from Redis's"))
    return found


@check("network")
def oidc(context: Context) -> list[Finding]:
    from roject.identity.oidc.config import oidc_discovery_url, oidc_enabled

    if not oidc_enabled():
        return []
    import requests

    url = oidc_discovery_url()
    try:
        answer = requests.get(url, timeout=NETWORK_SECONDS)
        answer.raise_for_status()
        answer.json()["authorization_endpoint"]
    except (requests.RequestException, ValueError, KeyError) as exc:
        return [
            Finding(
                level="error",
                code="oidc",
                message=f"the OIDC discovery document does not answer ({type(exc).__name__}): "
                "nobody can sign in with SSO.",
                fix="check ROJO_OIDC_ISSUER / ROJO_OIDC_DISCOVERY_URL and that this host "
                "reaches the provider.",
            )
        ]
    return []
