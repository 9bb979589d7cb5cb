"""The chat endpoint's wire formats: server-sent events, or NDJSON lines. One encoder each."""

import json
from dataclasses import dataclass
from typing import Literal

import orjson

from .events import (
    ApprovalRequiredEvent,
    ChatEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    SummaryEvent,
    ToolCallDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)

WireType = Literal[
    "START",
    "CHAT",
    "TOOL_CALL_DELTA",
    "TOOL_CALL",
    "APPROVAL_REQUIRED",
    "TOOL_RESULT",
    "SUMMARY",
    "ERROR",
    "DONE",
]

SSE = "text/event-stream"
NDJSON = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class WireEvent:
    """A numbered event of a turn, as the browser sees it: its wire name and its data."""

    seq: int
    type: WireType
    data: dict


def event_data(event: TurnEvent) -> dict:
    """An event's data on the wire: its fields but the tag (a result's change only if any)."""
    match event:
        case ChatEvent(text=text):
            return {"text": text}
        case ToolCallDeltaEvent(index=index, id=id_, name=name, chars=chars, path=path, text=text):
            data = {"index": index, "id": id_, "name": name, "chars": chars}
            if path is not None:
                data["path"] = path
            return {**data, "text": text} if text else data
        case ToolCallEvent(id=id_, name=name, args=args, index=index, of=of):
            data = {"id": id_, "name": name, "args": args}
            return data if of == 1 else {**data, "index": index, "of": of}
        case ApprovalRequiredEvent(id=id_, name=name, args=args, preview=preview, routed=routed):
            data = {"id": id_, "name": name, "args": args, "preview": preview}
            return {**data, "routed": True} if routed else data
        case ToolResultEvent(
            id=id_, name=name, result=result, ok=ok, change=change, mcp_server=server
        ):
            data = {"id": id_, "name": name, "result": result, "ok": ok}
            if change is not None:
                data["change"] = change
            if server is not None:  # not in the undo ledger: the page says so
                data["mcp"] = {"server": server, "undoable": False}
            return data
        case ApprovalRequiredEvent(id=id_, name=name, args=args, preview=preview):
            return {"id": id_, "name": name, "args": args, "preview": preview}
        case SummaryEvent(text=text, messages=messages):
            return {"text": text, "messages": messages}
        case StartEvent(conversation=conversation, message=message):
            return {"conversation": conversation, "message": message}
        case ErrorEvent(message=message, code=code):
            return {"message": message, "code": code}
        case DoneEvent():
            return {}
    raise TypeError(f"not a turn event: {event!r}")


def numbered(seq: int, event: TurnEvent) -> WireEvent:
    """The event as the wire carries it, numbered `seq` (0: unnumbered)."""
    return WireEvent(seq, event.type, event_data(event))


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
