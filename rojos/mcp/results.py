"""An MCP tool's result as the model reads it: a ToolOutcome.

Faithful, in words: text parts are joined; `structuredContent` comes as JSON beside the
text; an image, audio clip or resource is described with its type and size (the model
cannot use the bytes, and they would fill its window); `isError` makes the outcome a
failure whose message is the server's text. Bounded: what the model gets of one result is
at most ROJO_MAX_KEPT_RESULT_BYTES, cut with a note saying how much was left out, and
counted as it is put together (no string of the whole answer is built first). Past
ROJO_MAX_READ_BYTES the tool-call runner pages it, as any tool's (rojos/agent/kept_results.py).
"""

import json
from typing import Any

from django.conf import settings
from django.utils.translation import ngettext

from ..tools import ToolOutcome


def _decoded_size(data: str) -> int:
    """Bytes in base64 `data`, without decoding it."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _size(n: int) -> str:
    return f"{n:,} {ngettext('byte', 'bytes', n)}"


def describe_part(part: Any) -> str:
    """One content part in words: its text, or what it is and how big."""
    kind = getattr(part, "type", None)
    if kind == "text":
        return part.text
    if kind in ("image", "audio"):
        mime = getattr(part, "mime_type", None) or kind
        return f"[{kind} {mime}, {_size(_decoded_size(part.data or ''))}]"
    if kind == "resource":
        resource = part.resource
        mime = getattr(resource, "mime_type", None) or "unknown type"
        text = getattr(resource, "text", None)
        if text is not None:
            chars = f"{len(text):,} {ngettext('character', 'characters', len(text))}"
            return f"[resource {resource.uri} ({mime}, {chars})]\n{text}"
        blob = getattr(resource, "blob", "") or ""
        return f"[resource {resource.uri} ({mime}, {_size(_decoded_size(blob))})]"
    if kind == "resource_link":
        size = getattr(part, "size", None)
        mime = getattr(part, "mime_type", None) or "unknown type"
        sized = f", {_size(size)}" if isinstance(size, int) else ""
        return f"[resource link {part.uri} ({part.name}, {mime}{sized})]"
    return f"[{kind or 'unknown'} content]"


def _repeats(text: str, structured: Any) -> bool:
    """Whether the text only says again what the structured content says (servers are
    asked to send both)."""
    try:
        return json.loads(text) == structured
    except ValueError:
        return False


def _bounded_text(parts: list, limit: int) -> tuple[str, int]:
    """The parts in words, joined, within `limit` UTF-8 bytes; and the bytes left out."""
    pieces, used, left_out = [], 0, 0
    for number, part in enumerate(parts):
        piece = ("\n" if number else "") + describe_part(part)
        if left_out:
            left_out += len(piece)  # characters: close enough, and no copy
            continue
        size = len(piece) if piece.isascii() else len(piece.encode("utf-8"))
        if used + size <= limit:
            pieces.append(piece)
            used += size
            continue
        kept = piece.encode("utf-8")[: limit - used].decode("utf-8", "ignore")
        pieces.append(kept)
        left_out = size - len(kept.encode("utf-8"))
        used = limit
    return "".join(pieces), left_out


def _cut_note(left_out: int, limit: int) -> str:
    return (
        f"\n[… {left_out:,} more bytes of the MCP server's answer left out: it is over "
        f"ROJO_MAX_KEPT_RESULT_BYTES ({limit:,} bytes)]"
    )


def _wrapped(structured: Any) -> bool:
    """Whether the structured content is a plain text value wrapped as {"result": …}."""
    return (
        isinstance(structured, dict)
        and list(structured) == ["result"]
        and isinstance(structured["result"], str)
    )


def outcome_from_result(result: Any) -> ToolOutcome:
    """The outcome of a CallToolResult, within ROJO_MAX_KEPT_RESULT_BYTES."""
    limit = settings.ROJO_MAX_KEPT_RESULT_BYTES
    text, left_out = _bounded_text(list(result.content or []), limit)
    if left_out:
        text += _cut_note(left_out, limit)
    if result.is_error:
        return ToolOutcome.failure(text or "the MCP tool reported an error")
    structured = getattr(result, "structured_content", None)
    if _wrapped(structured) and (left_out or structured["result"] == text):
        return ToolOutcome.success(text)  # a plain value the server wrapped (maybe cut)
    if structured is not None and len(json.dumps(structured, default=str)) > limit - len(text):
        # Too big beside the text: the text alone, which servers are asked to send too.
        return ToolOutcome.success(
            text + "\n[the structured content is over ROJO_MAX_KEPT_RESULT_BYTES]"
        )
    if structured is not None:
        if _repeats(text, structured):
            return ToolOutcome.success(structured)
        return ToolOutcome.success({"text": text, "structuredContent": structured})
    return ToolOutcome.success(text)
