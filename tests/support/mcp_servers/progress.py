"""An MCP server whose tools report progress: steadily for longer than a test's short
ROJO_MCP_CALL_TIMEOUT, then fall silent, or as fast as they can.

Run over stdio (`python progress.py`). Its reports go to the call's progressToken; without
one (a client that sent none) the SDK sends nothing, and `steady` is just a slow call.
"""

import asyncio

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("progress")


@server.tool()
async def steady(steps: int, every: float, ctx: Context, label: str = "Fetching page") -> str:
    """Report `steps` steps, one each `every` seconds (`label` and the step's number as the
    message), then answer."""
    for step in range(1, steps + 1):
        await asyncio.sleep(every)
        await ctx.report_progress(step, steps, f"{label} {step}")
    return f"done after {steps} steps"


@server.tool()
async def falls_silent(steps: int, every: float, ctx: Context) -> str:
    """Report `steps` steps (no total), one each `every` seconds, then never answer."""
    for step in range(1, steps + 1):
        await asyncio.sleep(every)
        await ctx.report_progress(step, message=f"step {step}")
    await asyncio.sleep(3600)
    return "never"


@server.tool()
async def chatty(count: int, ctx: Context) -> str:
    """Report `count` steps as fast as it can (the last with a long, multi-line message)."""
    for step in range(1, count):
        await ctx.report_progress(step, count)
    await ctx.report_progress(count, count, "last\n<b>line</b> " + "x" * 500)
    return f"sent {count} reports"


if __name__ == "__main__":
    server.run("stdio")
