import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter


class ListFiles(RojoTool):
    """List one directory."""

    name = "list_files"
    description = (
        "List the entries of a directory in the project, sorted by name, each as "
        '{"name", "type": "file" | "directory"}. Use "" or "." for the project root. '
        "Not recursive. Read-only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": path_parameter('Directory relative to the project root; "" for the root.')
        },
        "required": ["path"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> list[dict]:
        return await asyncio.to_thread(storage.list_directory, ctx.project_root, args["path"])
