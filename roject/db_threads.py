"""Threads for the ORM calls of requests and turns, lent to each rather than started for each.

Django runs a request's database calls on a thread of the request's own, and each turn runs
its calls on a thread of its own too, so that a call that waits (SQLite busy, a row lock)
holds up no other request or turn. Starting such a thread stops the event loop until the new
thread first runs, and ending one started yet another thread to join it: under load, each
cost every stream some milliseconds. Here a finished request's or turn's thread waits for
the next one instead; each still has a thread to itself while it runs.
"""

import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

# Idle threads kept for the next request or turn; more than this end when they are returned.
IDLE_MAX = 64

_idle: list[ThreadPoolExecutor] = []


@contextlib.asynccontextmanager
async def lent_thread() -> AsyncIterator[None]:
    """Run the block's thread-sensitive calls (the ORM's) on a thread lent to it alone."""
    executor = _idle.pop() if _idle else ThreadPoolExecutor(1, thread_name_prefix="db")
    try:
        async with ThreadSensitiveContext(executor=executor):
            yield
    finally:
        # A call the block no longer waits for (it was cancelled) finishes before the next
        # borrower's first call: the executor runs one call at a time, in order.
        if len(_idle) < IDLE_MAX:
            _idle.append(executor)
        else:
            executor.shutdown(wait=False)


class LentThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request on a lent thread.

    Django's own ThreadSensitiveContext inside it then finds one entered and changes nothing.
    """

    async def __call__(self, scope, receive, send):
        async with lent_thread():
            await super().__call__(scope, receive, send)
