import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter


class ReadPathMeta(RojoTool):
    """Look at a path without reading it."""

    name = "read_path_meta"
    description = (
        "Get the type ('file' or 'directory'), size in bytes and last modification time "
        "(ISO 8601, UTC) of a path in the project. Use it to check whether a path exists "
        "before reading or writing it. Read-only."
    )
    parameters = {
        "type": "object",
        "properties": {"path": path_parameter("Path relative to the project root.")},
        "required": ["path"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        return await asyncio.to_thread(storage.path_meta, ctx.project_root, args["path"])
