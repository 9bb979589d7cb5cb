"""A forwarding HTTP proxy that adds `Authorization: Bearer <secret>` to every request.

The MCP conformance suite's server checks send no headers of their own, and Rojo's endpoint
serves only a token's user: this proxy stands where the suite's client would carry the token.
Everything else (method, path, Host, Origin, body, the streamed answer) passes unchanged, so
the endpoint judges the suite's requests, including those forging Host and Origin.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import uvicorn

# Set again by each side's own HTTP stack (and the token by the proxy).
_HOP_BY_HOP = {b"connection", b"content-length", b"transfer-encoding"}


class _ThreadedServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:
        """Install none: the test runner owns the process's signals."""


class BearerProxy:
    """An ASGI app forwarding to `upstream` (scheme://host:port) with the bearer token added."""

    def __init__(self, upstream: str, secret: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.secret = secret
        self._http: httpx2.AsyncClient | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP | {b"authorization"}
        ]
        headers.append((b"authorization", f"Bearer {self.secret}".encode()))
        url = self.upstream + scope["raw_path"].decode()
        if scope["query_string"]:
            url += "?" + scope["query_string"].decode()
        if self._http is None:  # made in the server's loop, on first use
            self._http = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300))
        request = self._http.build_request(scope["method"], url, headers=headers, content=body)
        response = await self._http.send(request, stream=True)
        try:
            reply_headers = [
                (k.lower(), v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP
            ]
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": reply_headers,
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


@contextmanager
def bearer_proxy(upstream: str, secret: str) -> Iterator[str]:
    """Run the proxy on a free port in a thread; yield its base URL (http://127.0.0.1:PORT)."""
    config = uvicorn.Config(
        BearerProxy(upstream, secret), host="127.0.0.1", port=0, log_level="warning",
        lifespan="off", loop="asyncio",
    )  # fmt: skip
    server = _ThreadedServer(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the bearer proxy did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
