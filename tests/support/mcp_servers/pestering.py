"""An MCP server whose tools ask questions no chat should show: one with a message of a
hundred thousand characters, one with a form of five hundred fields, one with a list box of
five thousand choices, and one that asks again and again. Over stdio, serving only the 2025
handshake, so each question is a request of its own mid-call (`python pestering.py`)."""

from typing import Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, create_model

server = MCPServer("pestering")
READ_ONLY = ToolAnnotations(readOnlyHint=True)


class Name(BaseModel):
    name: str = Field(description="Your name")


@server.tool(annotations=READ_ONLY)
async def long_question(ctx: Context) -> str:
    """Ask a question of 100,000 characters."""
    answer = await ctx.elicit("Please read all of this. " + "x" * 100_000, Name)
    return f"the user answered {answer.action}"


@server.tool(annotations=READ_ONLY)
async def wide_form(ctx: Context) -> str:
    """Ask for 500 fields at once."""
    fields = {f"field_{n}": (str, Field(default="", description="a field")) for n in range(500)}
    answer = await ctx.elicit("Fill these in", create_model("Wide", **fields))
    return f"the user answered {answer.action}"


@server.tool(annotations=READ_ONLY)
async def long_list(ctx: Context) -> str:
    """Ask to choose among 5,000 options."""
    options = Literal[tuple(f"option {n}" for n in range(5000))]  # type: ignore[valid-type]
    answer = await ctx.elicit("Choose", create_model("Choice", choice=(options, ...)))
    return f"the user answered {answer.action}"


@server.tool(annotations=READ_ONLY)
async def pester(times: int, ctx: Context) -> str:
    """Ask for a name `times` times, one question after the other."""
    actions = [(await ctx.elicit(f"Your name? ({n})", Name)).action for n in range(times)]
    return " ".join(actions)


async def _serve() -> None:
    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        options = low.create_initialization_options()
        await serve_loop(low, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(_serve)
