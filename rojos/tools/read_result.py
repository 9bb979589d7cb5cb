import asyncio

from django.conf import settings

from roject import storage

from .base import RojoTool, RojoToolContext
from .outcome import ToolError


class ReadResult(RojoTool):
    """Read a range of a tool result that was too large to hand over whole.

    Offered to every rojo, whatever it enables, once the conversation holds a kept result:
    that result is announced with a handle, and without this tool the rest of it could not
    be read; before, it would only lengthen every request. It reads only results kept for
    the conversation it runs in; what it returns counts against the reply's read budget
    like any result.
    """

    name = "read_result"
    description = (
        "Read part of an earlier tool result of this conversation that was too large to "
        'return whole: such a result came as {"head", "size", "handle"}. Give the handle, '
        "offset (a byte offset, from 0) and length (bytes, at most the read limit; default "
        'the read limit). Returns {"text", "offset", "end", "size"}: continue from end to '
        "read on. Each read counts against this reply's read budget: read only what you "
        "need. Read-only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "The handle the large result gave."},
            "offset": {"type": "integer", "description": "First byte to return, from 0."},
            "length": {"type": "integer", "description": "How many bytes to return at most."},
        },
        "required": ["handle"],
    }
    reads_kept_results = True
    default_enabled = False  # not a rojo's choice: see reads_kept_results

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        if ctx.conversation_id is None:
            raise ToolError("no results are kept outside a stored conversation")
        limit = settings.ROJO_MAX_READ_BYTES
        length = args.get("length", limit)
        if length > limit:
            raise ToolError(
                f"length {length:,} is over the read limit of {limit:,} bytes "
                "(ROJO_MAX_READ_BYTES); read in parts"
            )
        part = await asyncio.to_thread(
            storage.result_read,
            project_id=ctx.project_id,
            conversation_id=ctx.conversation_id,
            handle=args["handle"],
            offset=args.get("offset", 0),
            length=length,
        )
        return {"text": part.text, "offset": part.start, "end": part.end, "size": part.size}
