"""A test app's own tools, loaded through ROJO_TOOL_MODULES like a real app's."""

import asyncio

from roject.storage import StorageError, read_project_file, write_project_file
from rojos.tools import RojoTool, RojoToolContext, registry, rojo_tool


def _stamp(root, path: str, times: int) -> None:
    try:
        text = read_project_file(root, path)
    except StorageError:
        text = ""
    write_project_file(root, path, text + "stamp\n" * times)


@rojo_tool(writes=True)
async def stamp_file(ctx: RojoToolContext, path: str, times: int = 1) -> dict:
    """Append stamp lines to a file, creating it if needed.

    Args:
        path: The file to stamp, relative to the project root.
        times: How many stamp lines.
    """
    await asyncio.to_thread(_stamp, ctx.project_root, path, times)
    return {"ok": True}


class ShoutTool(RojoTool):
    """A class-based tool: upper-cases its text."""

    name = "shout"
    description = "Return the text in capitals."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to shout."}},
        "required": ["text"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> str:
        return args["text"].upper()


registry.register(ShoutTool())
