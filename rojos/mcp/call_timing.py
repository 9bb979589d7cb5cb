"""How long one tools/call may run: ROJO_MCP_CALL_TIMEOUT of silence, started again by each
progress report, up to ROJO_MCP_CALL_MAX_SECONDS in all.

The SDK's timeout (the whole call's bound) cancels the request on the server
(REQUEST_TIMEOUT). The SDK's own clock is not moved by progress, so the silence is timed
here: a caller's cancellation, which the SDK also tells the server of.
"""

import asyncio

import mcp_types as types
from django.conf import settings
from mcp import Client

from .progress import OnProgress


async def call_timed(
    client: Client, name: str, arguments: dict, *, quiet: float, on_progress: OnProgress | None
) -> types.CallToolResult:
    """`client`'s tools/call of `name`, ended by `quiet` seconds without a word from the
    server; each progress report is handed to `on_progress`."""
    loop = asyncio.get_running_loop()
    bound = max(settings.ROJO_MCP_CALL_MAX_SECONDS, quiet)
    async with asyncio.timeout(quiet) as silence:

        async def progressed(progress: float, total: float | None, message: str | None):
            if not silence.expired():
                silence.reschedule(loop.time() + quiet)
            if on_progress is not None:
                on_progress(progress, total, message)

        return await client.call_tool(
            name, arguments, read_timeout_seconds=bound, progress_callback=progressed
        )
