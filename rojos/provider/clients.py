"""SDK clients for the rojos' endpoints, on one HTTP connection pool per event loop.

Connections to a provider stay open between turns (no TCP or TLS handshake per turn), and an
SDK client is made once per endpoint, key and settings rather than once per turn.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx2
from django.conf import settings

from rojos.models import Rojo
from rojos.provider.refusals import refusal_not_retried

# The SDK (openai, over a second to import) is imported where it is used: the URLconf
# reaches this module, so every management command would pay for it. A server imports
# it at start (rojos/eager.py).
if TYPE_CHECKING:
    import openai

# Distinct endpoint-and-key clients kept per loop; past this the oldest is dropped.
_MAX_CLIENTS = 64

# The SDK's own headers (X-Stainless-*) tell every endpoint this server's OS, CPU, Python
# and SDK versions, and how it retries: no provider needs them, an administrator never
# chose to send them, and each goes through three header layers (the SDK's, httpx2's,
# aiohttp's) in every request. Left out: the client's here, those the SDK adds to each
# request by the request's options (request_options).
_PLATFORM = tuple(
    f"X-Stainless-{name}"
    for name in ("Lang", "Package-Version", "OS", "Arch", "Runtime", "Runtime-Version", "Async")
)
_PER_REQUEST = ("X-Stainless-Retry-Count", "X-Stainless-Read-Timeout")
# The OpenAI account the SDK reads from the environment (OPENAI_ORG_ID, OPENAI_PROJECT_ID)
# goes to OpenAI's own API only, not to every endpoint a rojo names.
_OPENAI_HOST = "api.openai.com"
_OPENAI_ACCOUNT = ("OpenAI-Organization", "OpenAI-Project")


def _left_out(names: tuple[str, ...]) -> dict:
    import openai

    return dict.fromkeys(names, openai.omit)


def _client_headers(base_url: str) -> dict:
    headers = _left_out(_PLATFORM)
    try:
        openai_api = urlsplit(base_url).hostname == _OPENAI_HOST
    except ValueError:  # the SDK says what is wrong with it
        openai_api = False
    if not openai_api:
        headers |= _left_out(_OPENAI_ACCOUNT)
    return headers


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The SDK's default verifying TLS context, built once per process.

    Loading the CA bundle costs about 20 ms of CPU, which each new pool would otherwise pay.
    """
    return httpx2.create_ssl_context()


@dataclass
class _LoopClients:
    pool: httpx2.AsyncClient
    lifetime: object = None
    sdk: dict[tuple, openai.AsyncOpenAI] = field(default_factory=dict)


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = (
    weakref.WeakKeyDictionary()
)


async def _lifetime(loop: asyncio.AbstractEventLoop, clients: _LoopClients):
    """Waits at its yield for as long as the loop runs.

    Event loops close the async generators still suspended when they shut down
    (asyncio.run, uvicorn, pytest-asyncio all do), which closes the pool on its own loop.
    """
    try:
        yield
    finally:
        if _loops.get(loop) is clients:
            del _loops[loop]
        await clients.pool.aclose()


async def _loop_clients() -> _LoopClients:
    import openai

    loop = asyncio.get_running_loop()
    clients = _loops.get(loop)
    if clients is None or clients.pool.is_closed:
        # The SDK's aiohttp transport (`openai[aiohttp]`) with its defaults: it reads a stream
        # for less than half the CPU of the default httpx one (docs/performance.md).
        # A redirect is not followed (the SDK's default follows any): a 307 or 308 would
        # send the conversation, and on the same host over HTTP the key, to an address the
        # provider's answer names, not the base URL an administrator set.
        clients = _LoopClients(
            pool=openai.DefaultAioHttpClient(
                verify=tls_context(),
                follow_redirects=False,
                event_hooks={"response": [refusal_not_retried]},
            )
        )
        clients.lifetime = _lifetime(loop, clients)
        await anext(clients.lifetime)
        _loops[loop] = clients
    return clients


async def rojo_client(rojo: Rojo) -> openai.AsyncOpenAI:
    """The SDK client for the rojo's endpoint and key, on the loop's pool; never close it.

    Closing it would close the pool of every turn on this loop; the loop closes the pool
    when it shuts down. A missing key is sent as a placeholder.
    """
    import openai

    clients = await _loop_clients()
    key = (
        rojo.base_url,
        rojo.resolved_api_key() or "no-key",
        settings.ROJO_PROVIDER_HEADERS_TIMEOUT,
        settings.ROJO_PROVIDER_RETRIES,
    )
    client = clients.sdk.get(key)
    if client is None:
        if len(clients.sdk) >= _MAX_CLIENTS:
            del clients.sdk[next(iter(clients.sdk))]
        client = clients.sdk[key] = openai.AsyncOpenAI(
            base_url=key[0],
            api_key=key[1],
            # Until the response's headers: the stream's own silence limit is the body
            # reader's (ROJO_PROVIDER_TIMEOUT, rojos.provider.stream).
            timeout=openai.Timeout(key[2], connect=min(10.0, key[2])),
            max_retries=key[3],
            http_client=clients.pool,
            default_headers=_client_headers(key[0]),
        )
    return client


# Each client's chat completions URL, whole: given a path, the SDK parses it and merges it
# with the base URL in every request (1.5% of a chat's start, `python -m bench.instructions
# --starts`); a whole URL it takes as it is.
_completions_urls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def completions_url(client: openai.AsyncOpenAI) -> str:
    """The client's chat completions URL, merged once per client by the SDK's own rule
    (its `_prepare_url`), so that it is the URL the SDK would make of the path."""
    url = _completions_urls.get(client)
    if url is None:
        url = _completions_urls[client] = str(client._prepare_url("/chat/completions"))
    return url


@functools.cache
def request_options() -> dict:
    """The SDK's options for a request to a rojo's endpoint: its own per-request headers
    left out (_PER_REQUEST). The same dict each time: the SDK copies it before a change."""
    return {"headers": _left_out(_PER_REQUEST)}
