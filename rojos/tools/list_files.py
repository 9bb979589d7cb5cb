import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter
from .outcome import ToolError

PAGE_SIZE = 500


class ListFiles(RojoTool):
    """List one directory, a page at a time when it is large."""

    name = "list_files"
    description = (
        "List the entries of a directory in the project, sorted by name, each as "
        '{"name", "type": "file" | "directory"}. Use "" or "." for the project root. '
        f"Not recursive. Read-only. A directory of more than {PAGE_SIZE} entries comes in "
        'pages: {"entries", "offset", "total", "cut"}; ask for the next page with offset.'
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": path_parameter('Directory relative to the project root; "" for the root.'),
            "offset": {"type": "integer", "description": "First entry to return, from 0."},
            "limit": {
                "type": "integer",
                "description": f"How many entries at most (default and maximum {PAGE_SIZE}).",
            },
        },
        "required": ["path"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> list[dict] | dict:
        listing = await asyncio.to_thread(storage.list_directory, ctx.project_root, args["path"])
        offset = args.get("offset", 0)
        limit = min(max(args.get("limit", PAGE_SIZE), 1), PAGE_SIZE)
        if offset < 0:
            raise ToolError("offset must be 0 or more")
        if offset == 0 and len(listing) <= limit and "limit" not in args:
            return listing
        page = listing[offset : offset + limit]
        return {
            "entries": page,
            "offset": offset,
            "total": len(listing),
            "cut": offset + len(page) < len(listing),
        }
