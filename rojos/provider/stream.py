"""Reading one streamed chat completion from any OpenAI-compatible provider, chunk by chunk.

The request goes through the SDK (auth, retries, timeouts and base URL stay the SDK's); the
stream is read as raw server-sent-event lines and each chunk parsed once, with orjson:
building a typed SDK object per chunk costs more CPU than the rest of a turn. What the
chunks mean is `stream_accumulator`'s job, what a failure says is `provider_failures`', and
how the request is built is `provider_request`'s.
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx2
import openai
import orjson
from django.conf import settings

from rojos import metrics
from rojos.errors import ProviderError, StreamBroken
from rojos.provider.admission import admitted
from rojos.provider.body import Idle, Read, Tick, body_reader
from rojos.provider.failures import ANY_ROJO, Fixes, failure_message, mid_stream_message
from rojos.provider.refusals import refusal_of
from rojos.provider.wire_text import lenient_loads
from rojos.scrub import scrub

# A line of the stream still unfinished past this size is held in pieces, joined once it
# ends: joined with each read and split again, a line of N bytes cost N²/read on the loop.
_LONG_LINE_BYTES = 256 * 1024
# No chunk is this long (a file's whole text as a call's arguments is ROJO_MAX_WRITE_BYTES):
# a body with no line end, a download say, is not read into memory past it.
_MAX_LINE_BYTES = 64 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_SPACE_AND_BOM = b" \t\r\n" + _BOM
# What an SSE body's first line begins with (llama.cpp's error line among them).
_SSE_FIELDS = (b"data:", b":", b"event:", b"id:", b"retry:", b"error:")
_LINE_TOO_LONG = (
    f"The provider sent a line of over {_MAX_LINE_BYTES // 2**20} MiB without an end, which "
    "is no stream of chunks: check the rojo's base URL."
)


async def provider_chunks(
    client: openai.AsyncOpenAI,
    request: dict,
    *,
    tick: Tick | None = None,
    idle: Idle | None = None,
    opened: Callable[[], None] | None = None,
    fixes: Fixes = ANY_ROJO,
) -> AsyncIterator[list[dict]]:
    """Yield the parsed chunks of one streaming chat completion, a list per network read.

    A fast stream brings several chunks per read; handing them over together crosses this
    generator once per read instead of once per chunk. With `tick`, an empty list comes
    after each quiet spell of tick()'s seconds, asked before each read (the loop then shows
    forming tool calls; tick() is None while there is none, and the read needs no timer).
    `idle` is called before each read that will wait, and as the stream ends: what the
    reader was given so far is all there is for now (a turn writes it to its followers).
    `opened` is called once the provider took the request (its answer's headers came, a
    success): from then on it bills it, whether a chunk follows or not.

    The request goes through the SDK's generic `post` (its auth, retries, timeouts, base URL
    and error types) as the plain JSON body it already is: the typed `create` would first
    walk every message and tool definition against its parameter types, about 0.6 ms a
    request. The body is read as raw bytes, split into lines here, each chunk parsed once.
    Transport and HTTP failures become ProviderError (ContextOverflow or OptionRefused when
    the loop can recover, provider_refusals; StreamBroken for the connection's own), whose
    message names `fixes` (the rojo's, failures.rojo_fixes: where its base URL and key are
    set); a stream that ends early simply stops, and the accumulator then reports it as
    unfinished.
    """
    sent = time.monotonic()
    try:
        response = await _response(client, request)
        if opened is not None:
            opened()
        try:
            kind = response.headers.get("content-type", "")
            if kind.startswith("text/html"):
                raise ProviderError(_web_page(client))
            rest = b""
            held: list[bytes] = []  # a long line's later pieces, joined once, as it ends
            held_bytes = 0
            event: list[bytes] = []  # the data lines of an event of several, not ended yet
            with body_reader(response, settings.ROJO_PROVIDER_TIMEOUT, tick, idle) as read:
                first = True
                while (data := await read()) != b"":
                    if first and data:  # the time to the first chunk: a test a read
                        first = False
                        metrics.first_chunk_seconds.observe(time.monotonic() - sent)
                        data = await _head(data, read)
                        if not data.strip():
                            raise ProviderError(_empty_body(client))
                        if data.lstrip().startswith(b"<"):  # a page labelled a stream (a portal)
                            raise ProviderError(_web_page(client))
                        if _one_json(data, kind):
                            yield [await _json_body(data, read, client.api_key)]
                            return
                    if data is None:
                        yield []
                        continue
                    if len(rest) > _LONG_LINE_BYTES:  # not joined and split again per read
                        if b"\n" not in data and b"\r" not in data:
                            held.append(data)
                            held_bytes += len(data)
                            if len(rest) + held_bytes > _MAX_LINE_BYTES:
                                raise ProviderError(_LINE_TOO_LONG)
                            continue
                        rest, held_bytes = b"".join((rest, *held)), 0
                        held.clear()
                    buffer = rest + data  # its complete lines, and the unfinished rest
                    lines = buffer.splitlines()  # (\n, \r\n or \r)
                    unfinished = lines and not buffer.endswith((b"\n", b"\r"))
                    rest = lines.pop() if unfinished else b""
                    chunks: list[dict] = []
                    try:
                        done = _parse_lines(lines, chunks, client.api_key, event)
                    except ProviderError:
                        if chunks:
                            yield chunks  # what came before the error in the same read counts
                        raise
                    if chunks:
                        yield chunks
                    if done:
                        await _drain(read)
                        return
                if first:  # not a byte: not a response cut short, but none at all
                    raise ProviderError(_empty_body(client))
                tail = b"".join((rest, *held))
                if tail or event:  # a last line, and an event, that the body's end ended
                    chunks = []
                    if not _parse_lines([tail], chunks, client.api_key, event) and event:
                        _parse_events([b""], chunks, client.api_key, event)
                    if chunks:
                        yield chunks
        finally:
            if idle is not None:
                idle()
            await response.aclose()
    except openai.APIStatusError as exc:
        metrics.provider_errors.labels(kind=f"http_{exc.status_code // 100}xx").inc()
        message = failure_message(exc, client, fixes)
        raise refusal_of(exc.body, exc.status_code, message) or ProviderError(message) from None
    except (
        openai.APIConnectionError,
        httpx2.HTTPError,
        aiohttp.ClientError,
        ValueError,
    ) as exc:
        metrics.provider_errors.labels(kind="connection").inc()
        raise StreamBroken(failure_message(exc, client, fixes)) from None


def _parse_lines(
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
                    chunk = _checked(chunk, secret)
                chunks.append(chunk)
        elif line.startswith(b"error:"):  # older llama.cpp's non-standard error line
            raise _error_line(line[6:].strip(), secret)
    return False


def _parse_events(
    lines: list[bytes], chunks: list[dict], secret: str | None, event: list[bytes]
) -> bool:
    """Parse SSE lines by SSE's rule: an event's data lines join with a line end, and a blank
    line ends it (a proxy that pretty-prints each chunk spreads it over several). A data line
    that is JSON alone with no event open is an event of its own, as `_parse_lines` reads it:
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
    """The JSON text parsed as `_parse_lines` parses a line's; ValueError if it is none."""
    try:
        return orjson.loads(payload)
    except ValueError:
        return lenient_loads(payload)


def _chunk_of(chunk: Any, secret: str | None) -> Any:
    """The parsed chunk, checked as `_parse_lines` checks a line's."""
    return _checked(chunk, secret) if type(chunk) is not dict or "error" in chunk else chunk


def _error_line(payload: bytes, secret: str | None) -> ProviderError:
    """Older llama.cpp's `error:` line: the error object it holds, read as a data chunk's
    would be. A prompt over the context comes this way once streaming began, and it is the
    overflow the turn recovers from (refusals), not a failure to show as raw JSON."""
    metrics.provider_errors.labels(kind="stream").inc()
    try:
        error = lenient_loads(payload)
    except ValueError:
        text = payload.decode(errors="replace")
        return ProviderError(scrub(f"The provider reported an error: {text}", secret))
    message = scrub(mid_stream_message(error), secret)
    return refusal_of(error, None, message) or ProviderError(message)


async def _head(data: bytes, read: Read) -> bytes:
    """The body's first bytes, as many as tell what it is: read on past white space and a
    UTF-8 byte-order mark cut short, and without the mark, which SSE says to ignore (kept,
    it hid the first line's `data:`, and that chunk was lost)."""
    while not data.lstrip(_SPACE_AND_BOM) or (len(data) < len(_BOM) and _BOM.startswith(data)):
        more = await read()
        if more == b"":
            break
        if more:  # None: a quiet spell
            data += more
    return data.removeprefix(_BOM)


def _one_json(head: bytes, kind: str) -> bool:
    """Whether the body is one JSON document, not a stream of events. Its first bytes tell,
    whatever its label: a server that ignored stream=true answers one completion, or an
    error object, under either; a proxy labels a stream application/json."""
    start = head.lstrip()
    if start.startswith((b"{", b"[")):
        return True
    return kind.startswith("application/json") and not start.startswith(_SSE_FIELDS)


async def _json_body(head: bytes, read: Read, secret: str | None) -> Any:
    """The whole body from `head` on, one JSON completion (or error object: raised)."""
    parts, size = [head], len(head)
    while (more := await read()) != b"":
        if more:
            parts.append(more)
            size += len(more)
            if size > _MAX_LINE_BYTES:
                raise ProviderError(_LINE_TOO_LONG)
    try:
        body = lenient_loads(b"".join(parts))
    except ValueError:
        raise ProviderError(_NOT_JSON_BODY) from None
    return _checked(body, secret)


async def _response(client: openai.AsyncOpenAI, request: dict) -> httpx2.Response:
    """The streaming response, once its headers came: each try waits for them at most
    ROJO_PROVIDER_HEADERS_TIMEOUT (the client's), all tries together ROJO_PROVIDER_TOTAL_TIMEOUT.
    """
    total = settings.ROJO_PROVIDER_TOTAL_TIMEOUT
    deadline = asyncio.timeout(total)
    admitted()  # the start's work on this process is done (rojos.turns.admission)
    try:
        async with deadline:
            return await client.post(
                "/chat/completions", **_body(request), cast_to=httpx2.Response, stream=True
            )
    except TimeoutError:
        if not deadline.expired():
            raise
        metrics.provider_errors.labels(kind="timeout").inc()
        raise ProviderError(
            f"The provider at {client.base_url} did not start answering within {total:g} "
            "seconds, retries included (ROJO_PROVIDER_TOTAL_TIMEOUT). Check that it is "
            "running and not overloaded."
        ) from None


def _body(request: dict) -> dict:
    """The request's JSON for the SDK's post: bytes by orjson (the SDK's own json.dumps took
    a start about 0.1 ms more on a short history, more on a long one), or the dict itself
    when orjson cannot encode it (a lone surrogate, an integer past 64 bits), for the SDK to
    encode or refuse as before."""
    try:
        return {"content": orjson.dumps(request)}
    except orjson.JSONEncodeError:
        return {"body": request}


async def _drain(read: Read) -> None:
    """Read the end of the body after [DONE], so that the connection goes back to the pool
    (one closed unread would be dropped); a server that keeps it open gets a second."""
    with contextlib.suppress(TimeoutError, httpx2.HTTPError, aiohttp.ClientError):
        async with asyncio.timeout(1):
            while await read() != b"":  # a quiet spell's None is not the end
                pass


def _checked(chunk: Any, secret: str | None) -> Any:
    """The chunk, unless it is an error object: that ends the turn, without the key in sight."""
    if isinstance(chunk, dict) and chunk.get("error"):
        message = scrub(mid_stream_message(chunk["error"]), secret)
        metrics.provider_errors.labels(kind="stream").inc()
        raise refusal_of(chunk["error"], None, message) or ProviderError(message)
    return chunk


_NOT_JSON = "The provider sent a stream chunk that is not valid JSON."
_NOT_JSON_BODY = (
    "The provider answered with a body that is neither JSON nor a stream of completion "
    "chunks: check the rojo's base URL."
)


def _empty_body(client: openai.AsyncOpenAI) -> str:
    """What a 200 with an empty body says: the provider failed without a word, and only its
    own log says why (llama-cpp-python answers a streamed request with tools so)."""
    metrics.provider_errors.labels(kind="stream").inc()
    return (
        f"The provider at {client.base_url} answered with an empty body: no text, call, finish "
        "reason or error. Its own log says why; some servers (llama-cpp-python) answer so to a "
        "streamed request with tools they cannot stream."
    )


def _web_page(client: openai.AsyncOpenAI) -> str:
    """What a 200 with a web page says: a base URL that names a site (a chat UI's, a login
    page of a proxy), not its API; read as a stream, it was a stream that never finished.
    Told by its label (text/html), or by its first byte, `<`, under any other (a captive
    portal's page labelled text/event-stream): no stream and no JSON begins so."""
    metrics.provider_errors.labels(kind="stream").inc()
    return (
        f"The provider at {client.base_url} answered with a web page, not a stream of "
        "completion chunks: check the rojo's base URL (an OpenAI-compatible API's usually "
        "ends in /v1) and that no proxy's login page is in the way."
    )
