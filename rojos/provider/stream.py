"""Reading one streamed chat completion from any OpenAI-compatible provider, chunk by chunk.

The request goes through the SDK (auth, retries, timeouts and base URL stay the SDK's); the
stream is read as raw server-sent-event lines and each chunk parsed once, with orjson:
building a typed SDK object per chunk costs more CPU than the rest of a turn. The lines'
parse is `sse_lines`' job, what a body other than a stream says is `body_shapes`', what the
chunks mean is `stream_accumulator`'s, what a failure says is `provider_failures`', and how
the request is built is `provider_request`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import httpx2
import orjson
from django.conf import settings

from rojos import metrics
from rojos.errors import ProviderError, StreamBroken
from rojos.provider.admission import admitted
from rojos.provider.body import Idle, Read, Tick, body_reader
from rojos.provider.body_shapes import (
    LINE_TOO_LONG,
    MAX_LINE_BYTES,
    body_head,
    empty_body,
    json_body,
    one_json,
    web_page,
)
from rojos.provider.clients import completions_url, request_options
from rojos.provider.failures import ANY_ROJO, Fixes, failure_message
from rojos.provider.refusals import refusal_of
from rojos.provider.sse_lines import parse_end, parse_lines

# The SDK (openai, over a second to import) is imported where it is used: the URLconf
# reaches this module, so every management command would pay for it. A server imports
# it at start (rojos/eager.py).
if TYPE_CHECKING:
    import openai

# A line of the stream still unfinished past this size is held in pieces, joined once it
# ends: joined with each read and split again, a line of N bytes cost N²/read on the loop.
_LONG_LINE_BYTES = 256 * 1024


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
    import aiohttp  # here: a management command needs no HTTP client (rojos/eager.py)
    import openai

    sent = time.monotonic()
    try:
        response = await _response(client, request)
        if opened is not None:
            opened()
        try:
            kind = response.headers.get("content-type", "")
            if kind.startswith("text/html"):
                raise ProviderError(web_page(client))
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
                        data = await body_head(data, read)
                        if not data.strip():
                            raise ProviderError(empty_body(client))
                        if data.lstrip().startswith(b"<"):  # a page labelled a stream (a portal)
                            raise ProviderError(web_page(client))
                        if one_json(data, kind):
                            yield [await json_body(data, read, client.api_key)]
                            return
                    if data is None:
                        yield []
                        continue
                    if len(rest) > _LONG_LINE_BYTES:  # not joined and split again per read
                        if b"\n" not in data and b"\r" not in data:
                            held.append(data)
                            held_bytes += len(data)
                            if len(rest) + held_bytes > MAX_LINE_BYTES:
                                raise ProviderError(LINE_TOO_LONG)
                            continue
                        rest, held_bytes = b"".join((rest, *held)), 0
                        held.clear()
                    buffer = rest + data  # its complete lines, and the unfinished rest
                    lines = buffer.splitlines()  # (\n, \r\n or \r)
                    unfinished = lines and not buffer.endswith((b"\n", b"\r"))
                    rest = lines.pop() if unfinished else b""
                    chunks: list[dict] = []
                    try:
                        done = parse_lines(lines, chunks, client.api_key, event)
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
                    raise ProviderError(empty_body(client))
                tail = b"".join((rest, *held))
                if tail or event:  # a last line, and an event, that the body's end ended
                    chunks = []
                    parse_end(tail, chunks, client.api_key, event)
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
                completions_url(client),
                **_body(request),
                cast_to=httpx2.Response,
                stream=True,
                options=request_options(),
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
    import aiohttp

    with contextlib.suppress(TimeoutError, httpx2.HTTPError, aiohttp.ClientError):
        async with asyncio.timeout(1):
            while await read() != b"":  # a quiet spell's None is not the end
                pass
