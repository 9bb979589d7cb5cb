"""How a session with one MCP server opens: its transport and SDK client, its tool list read
page by page (and followed for changes, on a 2026 connection), and why opening failed, told
without the server's URL.

The session's task (`connection`) decides when a session opens and ends; this module only
says how: what the client is made of and what a failure tells the model.
"""

import asyncio
import contextlib
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.auth import OAuthFlowError
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from rojos.scrub import scrub

from .bounds import MAX_TOOLS, tools_bounded
from .destinations import REFUSED, DestinationRefused, checked_client_options
from .oauth import SignInNeeded
from .process_log import StderrPipe
from .spec import ServerSpec

_PAGES = 20  # tools/list pages read at most: a server paging forever cannot hang a turn


class McpUnavailable(Exception):
    """The server could not be reached or started; the message says why, for the model."""


def client_make(
    *,
    spec: ServerSpec,
    root: Path,
    pipe: StderrPipe | None,
    stack: AsyncExitStack,
    on_message,
    on_question=None,
    auth: httpx2.Auth | None = None,
) -> Client:
    """The SDK client for the server: over stdio (its stderr into `pipe`) or streamable HTTP,
    signed in by `auth` (the SDK's OAuth, `oauth`) when given."""
    if pipe is not None:
        # Never the project's root: editors and the rojo write there, and a command reads
        # its working directory as its own (`python -m` imports from it first; npm, uv and
        # git read their settings there), so a file written there would run as the app.
        # An empty directory of the session's own, removed after it; `{project_root}` in
        # the arguments gives a server the project's files.
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="rojo-mcp-"))
        params = StdioServerParameters(
            command=spec.command,
            args=spec.arguments(root),
            env=spec.environment(),
            cwd=work,
        )
        transport = stdio_client(params, errlog=pipe.writer)
    else:
        # The SDK's client settings (a long read timeout for held streams), our headers,
        # connections only where the server's OAuth may go (`destinations`); a client
        # passed in is ours to close, after the session.
        http = httpx2.AsyncClient(
            headers=spec.http_headers(),
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            auth=auth,
            **checked_client_options(spec.url),
        )
        stack.push_async_callback(http.aclose)
        transport = streamable_http_client(spec.url, http_client=http)
    return Client(
        transport,
        cache=None,  # the tool list is kept by the connection, refreshed when the server says
        message_handler=on_message,
        elicitation_callback=on_question,  # questions during a call (`questions`)
        client_info=types.Implementation(name="rojo-chat", version="1"),
    )


async def tools_list(*, client: Client, spec: ServerSpec) -> list[types.Tool]:
    """The server's tools, read page by page up to a bound (`bounds`)."""
    tools: list[types.Tool] = []
    cursor = None
    for _page in range(_PAGES):
        result = await client.list_tools(cursor=cursor)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor or len(tools) > MAX_TOOLS:  # no use asking for more
            break
    return tools_bounded(tools, spec.slug)


async def tools_changes_follow(
    *, stack: AsyncExitStack, client: Client, on_change: Callable[[], None]
) -> None:
    """On a 2026 connection, changes come on a subscription: follow it in a child task, which
    calls `on_change` at each, until `stack` closes."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return  # an older one notifies them on the session (`connection._on_message`)
    capabilities = client.server_capabilities.tools
    if not (capabilities and capabilities.list_changed):
        return
    from mcp.client.subscriptions import SubscriptionLost

    subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))

    async def follow() -> None:
        with contextlib.suppress(SubscriptionLost):
            async for _event in subscription:
                on_change()

    task = asyncio.get_running_loop().create_task(follow())
    stack.callback(task.cancel)


def start_failure(spec: ServerSpec, exc: BaseException) -> str:
    """Why the server did not start, for the model and the project's members: it names the
    server, never its URL (which may hold a key); the log has the whole error."""
    exc = _inner(exc)
    if isinstance(exc, FileNotFoundError):
        why = f"the command {spec.command!r} was not found"
    elif isinstance(exc, httpx2.TransportError):
        why = f"it cannot be reached ({exc.__class__.__name__})"
    elif isinstance(exc, DestinationRefused):
        why = REFUSED
    elif isinstance(exc, SignInNeeded):
        why = "it asks for the account to be connected again (Connect)"
    elif isinstance(exc, OAuthFlowError):
        why = f"signing in to it failed ({exc.__class__.__name__})"
    elif isinstance(exc, MCPError):
        why = f"it refused the connection: {exc.error.message}"
    elif spec.stdio:
        why = f"{exc.__class__.__name__}: {exc}"[:300]
    else:
        why = exc.__class__.__name__
    return secrets_scrubbed(spec, f"the MCP server {spec.name!r} could not be started: {why}")


def _inner(exc: BaseException) -> BaseException:
    """The error inside the SDK's task groups, which wrap what failed (a sign-in, a
    connection) in an exception group, most often of one."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def secrets_scrubbed(spec: ServerSpec, text: str, auth: object = None) -> str:
    """`text` with the server's URL (with or without its query) left out, the secrets the
    admin gave it (`_values_scrubbed`), and the tokens its sign-in (`auth`, the SDK's OAuth
    provider) holds now: an access token is sent in place of a fixed header, and a server
    that quotes it in an error would show it to the member, store it in the history and
    send it to the model's provider (a shared account's, to every member)."""
    if spec.url:
        bare = urlsplit(spec.url)._replace(query="", fragment="").geturl()
        for url in sorted({spec.url, bare}, key=len, reverse=True):
            text = text.replace(url, "(its URL)")
    tokens = getattr(getattr(auth, "context", None), "current_tokens", None)
    if tokens is not None and text:
        for token in (tokens.access_token, tokens.refresh_token):
            text = scrub(text, token)
    return _values_scrubbed(spec, text)


# A stored value's words shorter than this are left in messages: a setting ("info", "true",
# "Bearer"), not a key.
_SHORTEST_SECRET_WORD = 8


def _values_scrubbed(spec: ServerSpec, text: str) -> str:
    """`text` without the values of the server's headers and variables (stored, or read from
    the environment), which the admin's form keeps write-only: a server that quotes the key
    it refused, whole or masked, would otherwise show it to members, store it in the
    history, and send it to the model's provider with the tool's error. Each word of a value
    of at least _SHORTEST_SECRET_WORD characters is scrubbed as a provider's key is."""
    values = {**spec.environment(), **spec.http_headers()}.values() if text else ()
    words = {word for value in values for word in value.split()}
    for word in sorted(words, key=len, reverse=True):
        if len(word) >= _SHORTEST_SECRET_WORD:
            text = scrub(text, word)
    return text
