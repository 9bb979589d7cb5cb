import asyncio

from roject.storage import delete_path, paths_under

from .base import RojoTool, RojoToolContext, path_parameter


class DeletePath(RojoTool):
    """Delete a file or directory."""

    name = "delete_path"
    description = (
        "Delete a file or an empty directory in the project. A directory that is not empty is "
        "deleted only with recursive: true, together with everything in it. The project root "
        'itself cannot be deleted. Returns {"ok": true, "deleted": [paths]}.'
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": path_parameter("The file or directory to delete, relative to the root."),
            "recursive": {
                "type": "boolean",
                "description": "Delete a non-empty directory with all its content.",
            },
        },
        "required": ["path"],
    }
    writes = True
    default_enabled = False  # destructive: an administrator enables it per rojo

    def changed_paths(self, args: dict) -> list[str]:
        return [args["path"]]

    def preview(self, args: dict, ctx: RojoToolContext) -> dict:
        return {"delete": paths_under(ctx.project_root, args["path"])}

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        deleted = await asyncio.to_thread(
            delete_path, ctx.project_root, args["path"], recursive=args.get("recursive", False)
        )
        return {"ok": True, "deleted": deleted}
