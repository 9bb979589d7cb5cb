import asyncio

from roject import storage
from roject.storage import move_path

from .base import RojoTool, RojoToolContext, path_parameter


class MovePath(RojoTool):
    """Rename or move a file or directory."""

    name = "move_path"
    description = (
        "Rename or move a file or directory inside the project, creating missing parent "
        "directories of the destination. An existing destination is refused unless overwrite "
        'is true. Returns {"ok": true}.'
    )
    parameters = {
        "type": "object",
        "properties": {
            "source": path_parameter("The file or directory to move, relative to the root."),
            "destination": path_parameter("Its new path, relative to the project root."),
            "overwrite": {
                "type": "boolean",
                "description": "Replace an existing file at the destination (default false).",
            },
        },
        "required": ["source", "destination"],
    }
    writes = True

    def changed_paths(self, args: dict) -> list[str]:
        return [args["source"], args["destination"]]

    def preview(self, args: dict, ctx: RojoToolContext) -> dict:
        exists = storage.entry_exists(ctx.project_root, args["destination"])
        replaces = exists and args.get("overwrite", False)
        return {"move": [args["source"], args["destination"]], "replaces": replaces}

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        await asyncio.to_thread(
            move_path,
            ctx.project_root,
            args["source"],
            args["destination"],
            overwrite=args.get("overwrite", False),
        )
        return {"ok": True}
