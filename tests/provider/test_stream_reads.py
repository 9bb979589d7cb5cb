"""A provider faster than its reader: the buffered reply is parsed at most 64 KiB at a time,
and what comes out is the reply, chunk for chunk, however the reads cut it."""

import asyncio
import gc
import json

import pytest
from asgiref.sync import sync_to_async

from rojos.provider.body import READ_MAX, _pieces
from tests.support.fake_provider import stream, text_chunks

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = " ".join(f"word{n}" for n in range(4000))


async def test_a_reply_buffered_past_64_kib_is_parsed_in_pieces_chunk_for_chunk(fake_provider):
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    chunks = text_chunks(WORDS, pieces=4000)
    fake_provider.add(stream(chunks))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    client = await rojo_client(rojo)
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}], "stream": True}

    batches = []
    async for batch in provider_chunks(client, request):
        batches.append(batch)
        if len(batches) == 1:
            await asyncio.sleep(0.5)  # the rest of the reply piles up in the transport's buffer

    assert [c for batch in batches for c in batch] == json.loads(json.dumps(chunks))
    shortest = min(len(f"data: {json.dumps(c)}\n\n") for c in chunks)
    most = READ_MAX // shortest + 1  # a read's lines, and the line cut at its end
    assert max(len(batch) for batch in batches[1:]) <= most
    assert sum(len(f"data: {json.dumps(c)}\n\n") for c in chunks) > 4 * READ_MAX


async def test_pieces_cut_big_reads_and_keep_every_byte():
    async def reads():
        yield b"a" * (2 * READ_MAX + 5)
        yield b"tail"

    pieces = [piece async for piece in _pieces(reads())]

    assert [len(p) for p in pieces] == [READ_MAX, READ_MAX, 5, 4]
    assert b"".join(pieces) == b"a" * (2 * READ_MAX + 5) + b"tail"


async def test_each_read_of_the_providers_socket_takes_at_most_recv_max(fake_provider):
    """asyncio's transport reads into a new buffer of its max_size (256 KiB): above the
    allocator's mmap threshold, every chunk's read mapped and unmapped one."""
    from urllib.parse import urlsplit

    from rojos.provider.body import RECV_MAX
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    # Paced: the body is still arriving as it is read (one that had all arrived before the
    # read began is not read from the socket again, and its connection would keep the size).
    fake_provider.add(stream(text_chunks("Hello there, how are you?", pieces=5), delay=0.05))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    client = await rojo_client(rojo)
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    port = urlsplit(fake_provider.base_url).port

    loop = asyncio.get_running_loop()

    def to_the_provider() -> list:
        """This loop's open connections to the provider (the pool is the loop's: another
        test's loop may have left connections of its own, never read from here). By the
        object's real type: isinstance asks a lazy object (an earlier test's request.user)
        its __class__, which loads it, a database query from this loop."""
        return [
            o
            for o in gc.get_objects()
            if issubclass(type(o), asyncio.Transport)
            and getattr(o, "_loop", None) is loop
            and not o.is_closing()
            and (o.get_extra_info("peername") or (None, None))[1] == port
        ]

    texts = []
    async for batch in provider_chunks(client, request):
        texts += [c["choices"][0]["delta"].get("content") or "" for c in batch]
        transports = to_the_provider()
        assert transports
        assert [t.max_size for t in transports] == [RECV_MAX] * len(transports)
    assert "".join(texts) == "Hello there, how are you?"


async def test_the_request_goes_as_utf8_json_with_its_content_type(fake_provider):
    """The body is encoded once, by orjson: the provider reads the same request as JSON."""
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    fake_provider.add(stream(text_chunks("Hi back")))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    client = await rojo_client(rojo)
    message = {"role": "user", "content": "Grüße ✓"}
    request = {"model": rojo.model, "messages": [message], "stream": True}

    [_ async for _ in provider_chunks(client, request)]

    assert fake_provider.requests == [request]
    assert fake_provider.headers[0]["content-type"] == "application/json"


@pytest.mark.parametrize("ending", ["", "/"])
async def test_the_request_goes_to_the_base_urls_chat_completions_each_time(fake_provider, ending):
    """The whole URL is merged once per client (rojos.provider.clients.completions_url), by
    the SDK's rule: with or without a slash at the base URL's end, every request of the
    client reaches <base>/chat/completions (the fake provider answers no other path)."""
    from rojos.provider.clients import completions_url, rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    rojo = await sync_to_async(make_rojo)(fake_provider.base_url + ending)
    client = await rojo_client(rojo)
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}]}
    for text in ("one", "two"):
        fake_provider.add(stream(text_chunks(text)))
        [_ async for _ in provider_chunks(client, {**request, "stream": True})]

    assert completions_url(client) == f"{fake_provider.base_url}/chat/completions"
    assert len(fake_provider.requests) == 2
    assert fake_provider.listing_requests == []


async def test_the_provider_is_told_nothing_of_the_servers_platform(fake_provider):
    """The SDK's X-Stainless-* headers (OS, CPU, Python and SDK versions, retries) are left
    out: the request carries its key, its content type and the SDK's User-Agent."""
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    fake_provider.add(stream(text_chunks("Hi")))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    client = await rojo_client(rojo)
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}]}

    [_ async for _ in provider_chunks(client, {**request, "stream": True})]

    sent = {name.lower() for name in fake_provider.headers[0]}
    assert not {name for name in sent if name.startswith("x-stainless")}
    assert {"authorization", "content-type", "accept", "user-agent"} <= sent


async def test_the_openai_account_of_the_environment_goes_to_openai_alone(
    fake_provider, monkeypatch
):
    """OPENAI_ORG_ID and OPENAI_PROJECT_ID, which the SDK reads from the environment, are
    sent to OpenAI's API, not to another endpoint a rojo names."""
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    monkeypatch.setenv("OPENAI_ORG_ID", "org-of-the-server")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-of-the-server")
    fake_provider.add(stream(text_chunks("Hi")))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    openai_rojo = await sync_to_async(make_rojo)(
        "https://api.openai.com/v1", name="OpenAI", slug="openai"
    )
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}]}

    [_ async for _ in provider_chunks(await rojo_client(rojo), {**request, "stream": True})]

    sent = {name.lower() for name in fake_provider.headers[0]}
    assert not sent & {"openai-organization", "openai-project"}
    to_openai = (await rojo_client(openai_rojo)).default_headers
    assert to_openai["OpenAI-Organization"] == "org-of-the-server"
    assert to_openai["OpenAI-Project"] == "proj-of-the-server"


async def test_a_body_orjson_cannot_encode_goes_to_the_sdks_encoder_and_fails_as_before():
    """A lone surrogate: orjson refuses it, the SDK's encoder then refuses it as it always
    did (the turn's ProviderError, not an unexpected exception)."""
    from rojos.provider.stream import _body

    request = {"messages": [{"role": "user", "content": "half \ud800 a pair"}]}

    assert _body(request) == {"body": request}
    assert _body({"n": 1}) == {"content": b'{"n":1}'}


async def _read_all(fake_provider) -> list[dict]:
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    client = await rojo_client(rojo)
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    return [chunk async for batch in provider_chunks(client, request) for chunk in batch]


def _line_in_pieces(chunk: dict, size: int) -> list[str]:
    line = f"data: {json.dumps(chunk)}\n\n"
    return [line[at : at + size] for at in range(0, len(line), size)]


async def test_a_line_of_megabytes_sent_in_small_pieces_is_read_whole(fake_provider):
    """A call's whole arguments in one chunk (Gemini, Mistral send them so): 3 MB written 8 KB
    at a time, held in pieces past 256 KiB and joined once, as its line ends."""
    big = {"choices": [{"index": 0, "delta": {"content": "x" * 3_000_000}}]}
    after = text_chunks("And the end.", pieces=2)
    fake_provider.add(stream(*_line_in_pieces(big, 8192), *after))

    chunks = await _read_all(fake_provider)

    assert chunks == [big, *json.loads(json.dumps(after))]


async def test_a_body_with_no_line_end_is_refused_past_the_longest_line(fake_provider, monkeypatch):
    """A base URL that streams a download (no line end, ever) is refused once the line passes
    the longest a chunk may be, not read into memory to its end."""
    from rojos.errors import ProviderError
    from rojos.provider import stream as streams

    monkeypatch.setattr(streams, "MAX_LINE_BYTES", 1_000_000)
    endless = ["z" * 8192] * 200  # 1.6 MB with no line end
    fake_provider.add(stream(*endless, done=False))

    with pytest.raises(ProviderError, match="without an end"):
        await _read_all(fake_provider)
