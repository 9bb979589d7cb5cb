"""The admin's look at what a server offers: start it, list its tools, store the list."""

import asyncio
import tempfile
from pathlib import Path

from django.utils import timezone

from ..models import McpServer
from .pool import mcp_pool, mcp_pool_close, mcp_server_relist
from .spec import ServerSpec


async def _list(spec: ServerSpec, root: Path, user_id: int | None) -> list[dict]:
    try:
        tools = await mcp_pool().connection(spec, root, user_id).tools()
    finally:
        await mcp_pool_close()
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def mcp_server_tools_refresh(*, server: McpServer, user_id: int | None = None) -> list[dict]:
    """(Blocking; no event loop in this thread) List the server's tools now and keep them;
    the running sessions of this process list them again too. A server each member signs
    in to is listed with `user_id`'s account (the admin's own), a shared one with its own.

    A stdio server runs in an empty scratch directory for it, as no project is involved.
    Raises what the connection raised (McpUnavailable, MCPError, TimeoutError …).
    """
    with tempfile.TemporaryDirectory(prefix="rojo-mcp-") as scratch:
        listed = asyncio.run(_list(ServerSpec.of(server), Path(scratch), user_id))
    server.listed_tools = listed
    server.listed_at = timezone.now()
    server.save(update_fields=["listed_tools", "listed_at"])
    mcp_server_relist(server.slug)
    return listed
