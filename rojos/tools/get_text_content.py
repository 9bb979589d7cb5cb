import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter


class GetTextContent(RojoTool):
    """Read a whole text file."""

    name = "get_text_content"
    description = (
        "Read the full content of a UTF-8 text file in the project and return it as a string. "
        "Binary files, directories and files over the size limit are refused. Read-only."
    )
    parameters = {
        "type": "object",
        "properties": {"path": path_parameter("Path of the file, relative to the project root.")},
        "required": ["path"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> str:
        return await asyncio.to_thread(storage.read_project_file, ctx.project_root, args["path"])
