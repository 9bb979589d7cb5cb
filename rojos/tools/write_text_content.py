import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter
from .diff import text_diff


class WriteTextContent(RojoTool):
    """Create or replace a text file, atomically."""

    name = "write_text_content"
    description = (
        "Write text to a file in the project, creating it (and any missing parent "
        'directories) or replacing its whole content. The write is atomic. Returns {"ok": true}.'
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": path_parameter("Path of the file, relative to the project root."),
            "text": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "text"],
    }
    writes = True
    follows_links = True

    def changed_paths(self, args: dict) -> list[str]:
        return [args["path"]]

    def preview(self, args: dict, ctx: RojoToolContext) -> dict:
        return {"diff": text_diff(ctx.project_root, args["path"], args["text"])}

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        await asyncio.to_thread(
            storage.write_project_file, ctx.project_root, args["path"], args["text"]
        )
        return {"ok": True}
