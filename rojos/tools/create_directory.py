import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter


class CreateDirectory(RojoTool):
    """Make a directory, parents included."""

    name = "create_directory"
    description = (
        "Create a directory in the project, including missing parent directories. An existing "
        'directory is fine; an existing file at that path is an error. Returns {"ok": true}.'
    )
    parameters = {
        "type": "object",
        "properties": {"path": path_parameter("Directory path relative to the project root.")},
        "required": ["path"],
    }
    writes = True
    destructive = False  # an existing directory is left as it is

    def changed_paths(self, args: dict) -> list[str]:
        return [args["path"]]

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        await asyncio.to_thread(storage.create_directory, ctx.project_root, args["path"])
        return {"ok": True}
