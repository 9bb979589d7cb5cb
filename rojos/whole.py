"""Awaiting a step to its end though the task awaiting it is cancelled meanwhile.

A Stop, a client gone or a claim taken over cancels a turn at whatever await it is in. Some
steps must not end halfway there: a message and its change record, a tool call already
changing the files, a reply and the usage record a budget counts, the end of an MCP call's
turn. Each runs in a task of its own that the cancellation does not reach; the cancelled
awaiter waits for its end, then lets the cancellation go on.
"""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def whole(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` to its end. Cancelled meanwhile, wait for that end, then raise its
    error if it failed, else CancelledError; a second cancel does not reach the step."""
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        task.result()
        raise
