"""/healthz and /readyz, answered before Django: an orchestrator's probes reach a process by
its address, with no session and often no Host an admin listed, and must not be redirected to
HTTPS, logged in, or counted against anyone's limits.

- /healthz: the process answers. Nothing else is touched, so a slow database never gets a
  healthy process restarted.
- /readyz: the configuration doctor finds no error in the settings (roject/doctor), the
  database answers and has every migration applied, Redis answers when it is configured,
  and the storage directory takes a file and a lock. 503 with the first failed
  check's name and reason otherwise. Neither reveals anything else (no versions, no paths).
"""

import asyncio
import fcntl
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from roject.doctor import doctor_run, serving_context
from roject.server.draining import draining

logger = logging.getLogger(__name__)

PATHS = ("/healthz", "/readyz")
# How long each readiness check may take; a probe's own timeout is usually a few seconds.
CHECK_SECONDS = 2.0


_migrated = False


def _database() -> str | None:
    """A query, and (until it has once been true) whether every migration is applied: loading
    the migration graph costs tens of milliseconds, and a release's code never un-migrates."""
    global _migrated
    from django.db.migrations.executor import MigrationExecutor

    close_old_connections()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        if not _migrated:
            executor = MigrationExecutor(connection)
            if executor.migration_plan(executor.loader.graph.leaf_nodes()):
                return "migrations are not applied (run manage.py migrate)"
            _migrated = True
        return None
    finally:
        connection.close()


def _storage() -> str | None:
    root = settings.ROJO_STORAGE_DIR
    os.makedirs(root, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=root, prefix=".ready-") as handle:
        handle.write(b"ready")
        handle.flush()
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


async def _redis() -> str | None:
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    from redis.asyncio import Redis

    client = Redis.from_url(url, socket_connect_timeout=CHECK_SECONDS)
    try:
        await client.ping()
    finally:
        await client.aclose()
    return None


async def _run(name: str, check: Callable[[], Awaitable[str | None]]) -> str | None:
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            problem = await check()
    except TimeoutError:
        problem = f"no answer within {CHECK_SECONDS:g} s"
    except Exception as exc:  # whatever a check's failure is, it is the check's answer
        problem = type(exc).__name__
        logger.warning("readiness check %s failed: %s", name, exc)
    return f"{name}: {problem}" if problem else None


_configuration_errors: list[str] | None = None


async def _configuration() -> str | None:
    """The configuration doctor's errors among its checks of settings alone (roject/doctor),
    with the address and processes the start's doctor had (ROJO_PUBLIC_URL, ROJO_PROCESSES),
    found once: settings do not change in a process's life."""
    global _configuration_errors
    if _configuration_errors is None:
        found = doctor_run(context=serving_context(), kinds=("settings",))
        _configuration_errors = [f.code for f in found if f.level == "error"]
    if _configuration_errors:
        return ", ".join(_configuration_errors) + " (run manage.py doctor)"
    return None


async def readiness() -> list[str]:
    """The failed checks, each `name: reason`; empty when the process can take requests."""
    if draining():
        return ["draining: this process is shutting down"]
    checks = {
        "configuration": _configuration,
        "database": sync_to_async(_database, thread_sensitive=False),
        "redis": _redis,
        "storage": sync_to_async(_storage, thread_sensitive=False),
    }
    found = await asyncio.gather(*(_run(name, check) for name, check in checks.items()))
    return [problem for problem in found if problem]


async def _answer(send, status: int, body: dict) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


class Probes:
    """ASGI middleware: GET /healthz and /readyz answered here, everything else passed on."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] not in PATHS:
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, {"status": "method not allowed"})
            return
        if scope["path"] == "/healthz":
            await _answer(send, 200, {"status": "ok"})
            return
        problems = await readiness()
        if problems:
            await _answer(send, 503, {"status": "unavailable", "reasons": problems})
        else:
            await _answer(send, 200, {"status": "ready"})
