"""The MCP SDK's own client over HTTP, with a bearer token, for the tests of the endpoint."""

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def mcp_url(base_url: str, project) -> str:
    return f"{base_url}/mcp/projects/{project}"


async def _session(
    url: str, secret: str, mode: str, work: Callable[[Client], Awaitable[Any]], headers: dict
):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}", **headers})
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        return await work(client)


def with_mcp(
    url: str,
    secret: str,
    work: Callable[[Client], Awaitable[Any]],
    mode="legacy",
    headers: dict | None = None,
):
    """Connect with the SDK's client (`mode`: "legacy", the initialize handshake that
    today's agents use, or "auto"; `headers` added to each request) and return what
    `work(client)` returns.

    On a thread of its own: the caller's may run an event loop already (Playwright's)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _session(url, secret, mode, work, headers or {})).result()
