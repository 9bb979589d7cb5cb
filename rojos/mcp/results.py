"""An MCP tool's result as the model reads it: a ToolOutcome.

Faithful, in words: text parts are joined; `structuredContent` comes as JSON beside the
text; an image, audio clip or resource is described with its type and size (the model
cannot use the bytes, and they would fill its window); `isError` makes the outcome a
failure whose message is the server's text.
"""

import json
from typing import Any

from ..tools import ToolOutcome


def _decoded_size(data: str) -> int:
    """Bytes in base64 `data`, without decoding it."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _size(n: int) -> str:
    return f"{n:,} bytes"


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
            return f"[resource {resource.uri} ({mime}, {len(text):,} characters)]\n{text}"
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


def outcome_from_result(result: Any) -> ToolOutcome:
    """The outcome of a CallToolResult."""
    text = "\n".join(describe_part(part) for part in result.content or [])
    if result.is_error:
        return ToolOutcome.failure(text or "the MCP tool reported an error")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        if structured == {"result": text}:  # a plain value the server wrapped
            return ToolOutcome.success(text)
        if _repeats(text, structured):
            return ToolOutcome.success(structured)
        return ToolOutcome.success({"text": text, "structuredContent": structured})
    return ToolOutcome.success(text)
