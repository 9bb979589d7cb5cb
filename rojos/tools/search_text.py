import asyncio

from roject.storage import MAX_MATCHES, search_text

from .base import RojoTool, RojoToolContext, path_parameter


class SearchText(RojoTool):
    """Find lines in the project's text files."""

    name = "search_text"
    description = (
        "Find lines containing a string (or matching a regular expression with regex: true) "
        "in the text files under a directory of the project (default: the whole project). "
        f'Returns {{"matches": [{{"path", "line", "text"}}], "cut"}}, at most '
        f"{MAX_MATCHES} matches; cut is true when there were more. Read-only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The text (or regex) to look for."},
            "path": path_parameter('Directory to search, relative to the root; default "".'),
            "regex": {"type": "boolean", "description": "Treat query as a regular expression."},
        },
        "required": ["query"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        return await asyncio.to_thread(
            search_text,
            ctx.project_root,
            args.get("path", ""),
            args["query"],
            regex=args.get("regex", False),
        )
