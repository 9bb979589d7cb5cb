import asyncio

from django.conf import settings

from roject.documents.reading import project_file_lines, project_file_text

from .base import RojoTool, RojoToolContext, path_parameter


class GetTextContent(RojoTool):
    """Read a text file, whole or in parts."""

    name = "get_text_content"
    description = (
        "Read a UTF-8 text file in the project (a PDF gives its text, with a [page N of M] "
        "line before each page). Without offset and limit it returns the whole "
        "content as a string (files over the size limit are refused). With offset (first line, "
        'from 1) and/or limit (number of lines) it returns {"text", "startLine", '
        '"endLine", "cut"}, where cut is true when more lines follow: use that to read '
        "large files in pieces. Read-only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": path_parameter("Path of the file, relative to the project root."),
            "offset": {"type": "integer", "description": "First line to return, from 1."},
            "limit": {"type": "integer", "description": "How many lines to return at most."},
        },
        "required": ["path"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext):
        if "offset" not in args and "limit" not in args:
            return await asyncio.to_thread(
                project_file_text,
                ctx.project_root,
                args["path"],
                max_bytes=settings.ROJO_MAX_READ_BYTES,
                note="; read on with offset and limit, in lines of this text",
            )
        return await asyncio.to_thread(
            project_file_lines,
            ctx.project_root,
            args["path"],
            offset=args.get("offset", 1),
            limit=args.get("limit"),
        )
