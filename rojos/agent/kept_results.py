"""Tool results over the read limit, paged rather than cut (#36).

A result larger than ROJO_MAX_READ_BYTES (as the model would read it) is kept with the
conversation, outside the project's root (roject.storage.results); the model gets its head,
its size and a handle, and reads any range of it with read_result. Only what the model is
handed counts against the turn's read budget: the head now, each read_result later.
"""

import asyncio
import logging

from django.conf import settings

from roject import storage
from rojos.agent.history import tool_content
from rojos.tools import ToolOutcome

logger = logging.getLogger(__name__)

# Enough of the head to judge what the result is and where to read, small beside the
# turn's read budget.
HEAD_BYTES = 16 * 1024


def _first(text: str, limit: int) -> str:
    """The first `limit` bytes of `text` in UTF-8, cut to whole characters."""
    if text.isascii():
        return text[:limit]
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


async def outcome_paged(
    outcome: ToolOutcome, *, project_id: int, conversation_id: int | None
) -> ToolOutcome:
    """The outcome as the model should get it: as it is, or, over the read limit, its head
    with its size and the handle of the whole, kept for the conversation."""
    limit = settings.ROJO_MAX_READ_BYTES
    if not outcome.ok or conversation_id is None or not limit:
        return outcome
    text = tool_content(outcome.result)
    if len(text) <= limit // 4 or (size := len(text.encode("utf-8"))) <= limit:
        return outcome  # the common case, without encoding the text
    kept_limit = settings.ROJO_MAX_KEPT_RESULT_BYTES
    kept = _first(text, kept_limit) if kept_limit and size > kept_limit else text
    head = _first(text, min(HEAD_BYTES, limit))
    try:
        handle = await asyncio.to_thread(
            storage.result_keep, project_id=project_id, conversation_id=conversation_id, text=kept
        )
    except storage.StorageError as exc:  # a full disk: the head, and the model told why
        logger.warning("a result of conversation %s was not kept: %s", conversation_id, exc)
        return ToolOutcome.success({"head": head, "size": size, "note": _unkept(head, exc)})
    note = (
        f"The result is {size:,} bytes, over the read limit of {limit:,} "
        f"(ROJO_MAX_READ_BYTES): this is its first {len(head.encode('utf-8')):,} bytes. "
        "Read any range of it with read_result (handle, offset, length)."
    )
    if kept is not text:
        note += (
            f" Only its first {kept_limit:,} bytes were kept (ROJO_MAX_KEPT_RESULT_BYTES): "
            "the rest is lost."
        )
    return ToolOutcome.success({"head": head, "size": size, "handle": handle, "note": note})


def _unkept(head: str, exc: Exception) -> str:
    """What the model is told of a result over the read limit that could not be kept."""
    return (
        f"The result is over the read limit (ROJO_MAX_READ_BYTES): this is its first "
        f"{len(head.encode('utf-8')):,} bytes, and the rest could not be kept to read in "
        f"parts ({exc}). Ask for less at once (a narrower search, offset and limit)."
    )
