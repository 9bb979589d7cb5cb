"""The chat endpoint's wire formats: server-sent events, or NDJSON lines. One encoder each."""

import json

import orjson

from rojos.agent.events import WireEvent

SSE = "text/event-stream"
NDJSON = "application/x-ndjson"


def _json(data: dict) -> bytes:
    """Compact UTF-8 JSON. orjson takes about a tenth of the standard library's time, which
    counts once per streamed chunk; what it refuses (integers over 64 bits) goes the slow way.
    """
    try:
        return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def encode_sse(event: WireEvent) -> bytes:
    """One SSE event; unnumbered (seq 0) events leave the client's Last-Event-ID alone.
    (Once per streamed chunk: one formatting, and orjson called here, not through _json.)"""
    try:
        data = orjson.dumps(event.data, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        data = _json(event.data)
    if event.seq:
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.type.encode(), data)
    return b"event: %s\ndata: %s\n\n" % (event.type.encode(), data)


def encode_ndjson(event: WireEvent) -> bytes:
    return _json({"type": event.type, **event.data}) + b"\n"


def encoder_for(accept: str):
    """NDJSON when the client asks for it, else server-sent events."""
    return (NDJSON, encode_ndjson) if NDJSON in (accept or "") else (SSE, encode_sse)
