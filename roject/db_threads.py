"""A thread of its own for the ORM calls of each request and each turn, started and ended
without stopping the event loop.

Each request and each turn runs its database calls on a thread of its own, so that a call
that waits (SQLite busy, a row lock) holds up no other request or turn. asgiref starts that
thread on the event loop, which then waits until the new thread first runs, and at the end
starts one more thread to join it: under load, each of those stopped every stream for some
milliseconds. Here the thread is started from a worker thread and, at the end, left to
finish on its own.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler
from django.db import connections


def _started(executor: ThreadPoolExecutor) -> None:
    executor.submit(int).result()  # starts the executor's thread and waits until it runs


def _pooled_connections_return() -> None:
    """Give the thread's pooled connections back to the pool, but one inside a transaction.

    A thread keeps its connection between calls; a streaming reply (its request's thread
    and its turn's) would hold two for minutes, and PostgreSQL's allowance (100 by default)
    would cap the replies at about 50 across all processes.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()


class _LendingExecutor(ThreadPoolExecutor):
    """A thread whose pooled database connections are lent for one call at a time."""

    def submit(self, fn, /, *args, **kwargs):
        def call():
            try:
                return fn(*args, **kwargs)
            finally:
                _pooled_connections_return()

        return super().submit(call)


def _executor() -> ThreadPoolExecutor:
    pooled = any(db.get("OPTIONS", {}).get("pool") for db in connections.settings.values())
    return (_LendingExecutor if pooled else ThreadPoolExecutor)(1, thread_name_prefix="db")


@contextlib.asynccontextmanager
async def own_thread() -> AsyncIterator[None]:
    """Run the block's thread-sensitive calls (the ORM's) on a new thread of its own, whose
    database connections are closed after it (after each call, when they come from a pool)."""
    executor = _executor()
    try:
        await asyncio.to_thread(_started, executor)
        async with ThreadSensitiveContext(executor=executor):
            yield
    finally:
        # Last on the thread: close its database connections, which would otherwise stay
        # open until garbage collection. No join: the thread ends once that is done.
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)


class OwnThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request on a thread of its own (own_thread).

    Django's own ThreadSensitiveContext inside it then finds one entered and changes nothing.
    """

    async def __call__(self, scope, receive, send):
        async with own_thread():
            await super().__call__(scope, receive, send)
