"""What a provider's answer turned out to be, told by its first bytes: a stream of events, one
JSON document (a completion, or an error object), an empty body or a web page.

A base URL that names a site, a proxy's login page, a server that ignored stream=true: each
answers 200 with something other than a stream, and the turn says which, not "unfinished".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rojos import metrics
from rojos.errors import ProviderError
from rojos.provider.body import Read
from rojos.provider.sse_lines import chunk_checked
from rojos.provider.wire_text import lenient_loads

# The SDK (openai, over a second to import) only for annotations here; where it is used, it
# is imported then: the URLconf reaches this module, so every management command would pay
# for it. A server imports it at start (rojos/eager.py).
if TYPE_CHECKING:
    import openai

# No chunk is this long (a file's whole text as a call's arguments is ROJO_MAX_WRITE_BYTES):
# a body with no line end, a download say, is not read into memory past it.
MAX_LINE_BYTES = 64 * 1024 * 1024
LINE_TOO_LONG = (
    f"The provider sent a line of over {MAX_LINE_BYTES // 2**20} MiB without an end, which "
    "is no stream of chunks: check the rojo's base URL."
)
_BOM = b"\xef\xbb\xbf"
_SPACE_AND_BOM = b" \t\r\n" + _BOM
# What an SSE body's first line begins with (llama.cpp's error line among them).
_SSE_FIELDS = (b"data:", b":", b"event:", b"id:", b"retry:", b"error:")
_NOT_JSON_BODY = (
    "The provider answered with a body that is neither JSON nor a stream of completion "
    "chunks: check the rojo's base URL."
)


async def body_head(data: bytes, read: Read) -> bytes:
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


def one_json(head: bytes, kind: str) -> bool:
    """Whether the body is one JSON document, not a stream of events. Its first bytes tell,
    whatever its label: a server that ignored stream=true answers one completion, or an
    error object, under either; a proxy labels a stream application/json."""
    start = head.lstrip()
    if start.startswith((b"{", b"[")):
        return True
    return kind.startswith("application/json") and not start.startswith(_SSE_FIELDS)


async def json_body(head: bytes, read: Read, secret: str | None) -> Any:
    """The whole body from `head` on, one JSON completion (or error object: raised)."""
    parts, size = [head], len(head)
    while (more := await read()) != b"":
        if more:
            parts.append(more)
            size += len(more)
            if size > MAX_LINE_BYTES:
                raise ProviderError(LINE_TOO_LONG)
    try:
        body = lenient_loads(b"".join(parts))
    except ValueError:
        raise ProviderError(_NOT_JSON_BODY) from None
    return chunk_checked(body, secret)


def empty_body(client: openai.AsyncOpenAI) -> str:
    """What a 200 with an empty body says: the provider failed without a word, and only its
    own log says why (llama-cpp-python answers a streamed request with tools so)."""
    metrics.provider_errors.labels(kind="stream").inc()
    return (
        f"The provider at {client.base_url} answered with an empty body: no text, call, finish "
        "reason or error. Its own log says why; some servers (llama-cpp-python) answer so to a "
        "streamed request with tools they cannot stream."
    )


def web_page(client: openai.AsyncOpenAI) -> str:
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
