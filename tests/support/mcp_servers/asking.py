"""An MCP server whose tools ask the user something mid-call (elicitation), over stdio.

`greet` asks for a name (and how many times to greet, 1 unless told) and answers with what
came back: the greeting, or how the question was answered (declined, cancelled). `order`
asks which toppings (an optional field of several choices, two chosen unless told), crust
and a note for the driver (optional, their form starting at a default) and answers with
what it got, or that a field was left out. `confirm` asks for two fields named as an HTML
form's own properties (`querySelectorAll`, `reportValidity`). `visit`
asks the user to open a URL (only on a 2025 connection: the SDK's 2026 flow has no URL
question). Run as `python asking.py [legacy]`: with `legacy` it serves only the 2025
handshake, so the question comes as a request of its own mid-call; else in the call's
`input_required` result (2026).
"""

import sys
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("asking")
READ_ONLY = ToolAnnotations(readOnlyHint=True)


class Name(BaseModel):
    name: str = Field(description="Your name")
    times: int = Field(default=1, description="How many times to greet you")


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool(annotations=READ_ONLY)
async def greet(answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Greet the user by the name they give when asked."""
    if answer.action == "accept":
        return " ".join([f"Hello, {answer.data.name}!"] * answer.data.times)
    return f"no greeting: the user answered {answer.action}"


class Toppings(BaseModel):
    toppings: list[Literal["cheese", "olives", "ham"]] = Field(
        default=["cheese", "olives"], description="On your pizza"
    )
    # The schema's default is where the form starts; the model's None, and the fields it was
    # given, tell a field the person emptied (left out) from one sent as shown.
    crust: Literal["thin", "thick"] | None = Field(
        default=None, json_schema_extra={"default": "thin"}, description="Crust"
    )
    note: str | None = Field(
        default=None, json_schema_extra={"default": "Ring twice"}, description="For the driver"
    )


def _given(data: BaseModel, name: str) -> str:
    return str(getattr(data, name)) if name in data.model_fields_set else "left out"


def ask_toppings() -> Elicit[Toppings]:
    return Elicit("Which toppings?", Toppings)


@server.tool(annotations=READ_ONLY)
async def order(answer: Annotated[ElicitationResult[Toppings], Resolve(ask_toppings)]) -> str:
    """Order a pizza with the toppings the user picks when asked."""
    if answer.action == "accept":
        toppings = ", ".join(answer.data.toppings) or "none"
        crust, note = _given(answer.data, "crust"), _given(answer.data, "note")
        return f"toppings: {toppings}; crust: {crust}; note: {note}"
    return f"no order: the user answered {answer.action}"


class Shadowing(BaseModel):
    # Names an HTML form's own properties have: a form whose controls took them lost those.
    querySelectorAll: str = Field(description="Anything")
    reportValidity: bool = Field(default=True, description="Sure?")


def ask_shadowing() -> Elicit[Shadowing]:
    return Elicit("Fields named as a form's own?", Shadowing)


@server.tool(annotations=READ_ONLY)
async def confirm(answer: Annotated[ElicitationResult[Shadowing], Resolve(ask_shadowing)]) -> str:
    """Ask for two fields named as an HTML form's own properties are."""
    if answer.action == "accept":
        return f"got {answer.data.querySelectorAll} ({answer.data.reportValidity})"
    return f"the user answered {answer.action}"


@server.tool(annotations=READ_ONLY)
async def visit(ctx: Context) -> str:
    """Ask the user to visit the sign-up page."""
    answer = await ctx.elicit_url("Sign up first", "https://example.com/sign-up", "sign-up-1")
    return f"the user answered {answer.action}"


async def _legacy() -> None:
    """Serve the handshake era only (as a server from before 2026 does)."""
    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        options = low.create_initialization_options()
        await serve_loop(low, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    if sys.argv[1:] == ["legacy"]:
        anyio.run(_legacy)
    else:
        server.run()
