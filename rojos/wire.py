"""The chat endpoint's wire formats: server-sent events, or NDJSON lines. One encoder each."""

import json
from dataclasses import dataclass
from typing import Literal

import orjson

from .events import AgentEvent, ApprovalRequiredEvent, TextEvent, ToolCallEvent, ToolResultEvent

WireType = Literal[
    "START", "CHAT", "TOOL_CALL", "APPROVAL_REQUIRED", "TOOL_RESULT", "ERROR", "DONE"
]

SSE = "text/event-stream"
NDJSON = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class WireEvent:
    """A numbered event of a turn, as the browser sees it."""

    seq: int
    type: WireType
    data: dict


def wire_payload(event: AgentEvent) -> tuple[WireType, dict]:
    """Map an agent event to its wire type and data."""
    match event:
        case TextEvent(text=text):
            return "CHAT", {"text": text}
        case ToolCallEvent(id=id_, name=name, args=args):
            return "TOOL_CALL", {"id": id_, "name": name, "args": args}
        case ToolResultEvent(id=id_, name=name, result=result, ok=ok, change=change):
            data = {"id": id_, "name": name, "result": result, "ok": ok}
            return "TOOL_RESULT", data if change is None else {**data, "change": change}
        case ApprovalRequiredEvent(id=id_, name=name, args=args, preview=preview):
            return "APPROVAL_REQUIRED", {"id": id_, "name": name, "args": args, "preview": preview}
    raise TypeError(f"not an agent event: {event!r}")


def _json(data: dict) -> bytes:
    """Compact UTF-8 JSON. orjson takes about a tenth of the standard library's time, which
    counts once per streamed chunk; what it refuses (integers over 64 bits) goes the slow way.
    """
    try:
        return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def encode_sse(event: WireEvent) -> bytes:
    """One SSE event; unnumbered (seq 0) events leave the client's Last-Event-ID alone."""
    head = b"id: %d\n" % event.seq if event.seq else b""
    return b"%sevent: %s\ndata: %s\n\n" % (head, event.type.encode(), _json(event.data))


def encode_ndjson(event: WireEvent) -> bytes:
    return _json({"type": event.type, **event.data}) + b"\n"


def encoder_for(accept: str):
    """NDJSON when the client asks for it, else server-sent events."""
    return (NDJSON, encode_ndjson) if NDJSON in (accept or "") else (SSE, encode_sse)
