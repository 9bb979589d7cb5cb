"""The sessions of this process: one per (server, project) and event loop.

The servers (daphne, uvicorn) run one loop; the `chat` command and tests may run others,
one after another. A session belongs to the loop it was started on, so each loop has its
own pool, and a closed loop's sessions end with it (asyncio.run cancels their tasks, and
the SDK stops the server as its client is left).
"""

import asyncio
import weakref
from pathlib import Path

from .connect.provider import connection_auth
from .connection import McpConnection
from .spec import ServerSpec

_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, McpPool]" = (
    weakref.WeakKeyDictionary()
)


class McpPool:
    """The running loop's sessions, by server slug, project root and, for a server each
    member signs in to, the person: one member's session never carries another's token."""

    def __init__(self) -> None:
        self._connections: dict[tuple[str, Path, int | None], McpConnection] = {}

    def connection(self, spec: ServerSpec, root: Path, user_id: int | None = None) -> McpConnection:
        """The session for the server in the project (and the person's, where each member
        signs in), new if the server's settings changed."""
        person = user_id if spec.per_person else None
        key = (spec.slug, root, person)
        found = self._connections.get(key)
        if found is not None and found.spec != spec:
            found.stop()  # edited in the admin: its next use runs the new settings
            found = None
        if found is None:
            auth = connection_auth(spec, person)
            found = McpConnection(spec, root, auth=auth, user_id=person)
            self._connections[key] = found
        return found

    def connections(self) -> list[McpConnection]:
        return list(self._connections.values())

    async def aclose(self) -> None:
        """Stop every session and wait until their servers are gone."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.aclose() for c in connections))


def mcp_pool() -> McpPool:
    """The pool of the running event loop."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = McpPool()
    return pool


def mcp_server_relist(slug: str) -> None:
    """(Any thread) The server's sessions in this process list its tools again at their
    next use (the admin asked what it offers now)."""
    for loop, pool in list(_pools.items()):
        for connection in pool.connections():
            if connection.spec.slug == slug and not loop.is_closed():
                loop.call_soon_threadsafe(connection.mark_stale)


def mcp_account_sessions_stop(slug: str, user_id: int | None) -> None:
    """(Any thread) Stop this process's sessions of the server that sign in as the person
    (None: every session of a shared connection): their tokens were deleted."""
    for loop, pool in list(_pools.items()):
        for connection in pool.connections():
            mine = connection.user_id == user_id or user_id is None
            if connection.spec.slug == slug and mine and not loop.is_closed():
                loop.call_soon_threadsafe(connection.stop)


async def mcp_pool_close() -> None:
    """Stop the running loop's sessions (the app's shutdown, a test's end)."""
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.aclose()
