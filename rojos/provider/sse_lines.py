"""A provider stream's server-sent-event lines read into chunks, each parsed once.

Every provider sends each chunk as one `data:` line, read here without a helper's call per
line (`parse_lines`, once per chunk of every streaming reply); a proxy that pretty-prints a
chunk over several lines, llama.cpp's `error:` line and an error object among the chunks are
the exceptions, read by SSE's rule and the error's own. Where the lines come from (the body's
reads, a long line held in pieces) is `stream`'s job.
"""

from typing import Any

import orjson

from rojos import metrics
from rojos.errors import ProviderError
from rojos.provider.refusals import mid_stream_error
from rojos.provider.wire_text import lenient_loads
from rojos.scrub import scrub

_NOT_JSON = "The provider sent a stream chunk that is not valid JSON."


def parse_lines(
    lines: list[bytes], chunks: list[dict], secret: str | None, event: list[bytes]
) -> bool:
    """Parse SSE lines into `chunks`; True once [DONE] is read (what follows is ignored).
    (Once per chunk: a plain chunk is parsed and checked here, without the helpers' calls.)

    Each data line is read as an event of its own, as every provider sends them; one that is
    not JSON alone, and what follows it, is read by SSE's rule (`_parse_events`), which
    `event` then holds the unended event's lines for, until it ends."""
    if event:  # an event of several data lines goes on in this read
        return _parse_events(lines, chunks, secret, event)
    for line in lines:
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return True
            if payload:
                try:
                    chunk = orjson.loads(payload)  # a few times faster than json.loads
                except ValueError:
                    try:  # a lone surrogate, say (wire_text)
                        chunk = lenient_loads(payload)
                    except ValueError:  # the first of an event's several lines, maybe
                        return _parse_events(lines[lines.index(line) :], chunks, secret, event)
                if type(chunk) is not dict or "error" in chunk:
                    chunk = chunk_checked(chunk, secret)
                chunks.append(chunk)
        elif line.startswith(b"error:"):  # older llama.cpp's non-standard error line
            raise _error_line(line[6:].strip(), secret)
    return False


def parse_end(tail: bytes, chunks: list[dict], secret: str | None, event: list[bytes]) -> None:
    """Parse into `chunks` what the body's end ends: its last line, unended, and an event of
    several data lines still open."""
    if not parse_lines([tail], chunks, secret, event) and event:
        _parse_events([b""], chunks, secret, event)


def _parse_events(
    lines: list[bytes], chunks: list[dict], secret: str | None, event: list[bytes]
) -> bool:
    """Parse SSE lines by SSE's rule: an event's data lines join with a line end, and a blank
    line ends it (a proxy that pretty-prints each chunk spreads it over several). A data line
    that is JSON alone with no event open is an event of its own, as `parse_lines` reads it:
    joined with a next line it would be no JSON. `event` holds an unended event's lines."""
    for line in lines:
        if not line:
            if event and _event_ended(event, chunks, secret):
                return True
        elif line.startswith(b"data:"):
            payload = line[5:].strip()
            if not event:
                if payload == b"[DONE]":
                    return True
                if not payload:
                    continue
                try:
                    chunk = _loaded(payload)
                except ValueError:  # an event's first line
                    pass
                else:
                    chunks.append(_chunk_of(chunk, secret))
                    continue
            event.append(payload)
        elif line.startswith(b"error:"):
            raise _error_line(line[6:].strip(), secret)
    return False


def _event_ended(event: list[bytes], chunks: list[dict], secret: str | None) -> bool:
    """Parse an event of several data lines into `chunks`; True if it was [DONE]."""
    payload = b"\n".join(event).strip()
    event.clear()
    if payload == b"[DONE]":
        return True
    try:
        chunk = _loaded(payload)
    except ValueError:
        raise ProviderError(_NOT_JSON) from None
    chunks.append(_chunk_of(chunk, secret))
    return False


def _loaded(payload: bytes) -> Any:
    """The JSON text parsed as `parse_lines` parses a line's; ValueError if it is none."""
    try:
        return orjson.loads(payload)
    except ValueError:
        return lenient_loads(payload)


def _chunk_of(chunk: Any, secret: str | None) -> Any:
    """The parsed chunk, checked as `parse_lines` checks a line's."""
    return chunk_checked(chunk, secret) if type(chunk) is not dict or "error" in chunk else chunk


def _error_line(payload: bytes, secret: str | None) -> ProviderError:
    """Older llama.cpp's `error:` line: the error object it holds, read as a data chunk's
    would be. A prompt over the context comes this way once streaming began, and it is the
    overflow the turn recovers from (refusals), not a failure to show as raw JSON."""
    metrics.provider_errors.labels(kind="stream").inc()
    try:
        error = lenient_loads(payload)
    except ValueError:
        said = scrub(payload.decode(errors="replace"), secret)
        failure = ProviderError(f"The provider reported an error: {said}")
        failure.said = said  # its words, as mid_stream_error keeps an error object's
        return failure
    return mid_stream_error(error, secret)


def chunk_checked(chunk: Any, secret: str | None) -> Any:
    """The chunk, unless it is an error object: that ends the turn, without the key in sight."""
    if isinstance(chunk, dict) and chunk.get("error"):
        metrics.provider_errors.labels(kind="stream").inc()
        raise mid_stream_error(chunk["error"], secret)
    return chunk
