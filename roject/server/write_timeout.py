"""Bounded output per connection: a client that reads nothing for a while is disconnected.

A streamed reply is written as fast as the turn produces it. A client that stops reading
(a stalled proxy, a laptop put to sleep, a script that never reads) leaves what is written
somewhere: uvicorn stops the writer once its buffer holds 64 KiB, and waits for ever; daphne
(Twisted) does not stop it, and kept the whole unsent stream in memory (413 MiB for ten such
clients of 100,000-chunk replies). Here each write of a response waits, for at most
ROJO_CLIENT_WRITE_TIMEOUT seconds, until the server's buffer for the connection has room:

- uvicorn: its `send` waits for room itself, before it writes, and only while its flow
  control is paused; the wait is bounded. A write made while it is not paused cannot wait,
  and goes out without a timer: a timer per chunk (a Timeout, a TimerHandle in the loop's
  heap, its cancel) was a tenth of a stream's CPU per chunk (docs/performance.md, §10).
- daphne: the request gets a Twisted push producer, which the transport pauses once its
  buffer is full (64 KiB) and resumes when it empties; a write made while paused waits.

Past the timeout the connection is aborted (not closed: a close would wait for the unsent
data to go out) and the response ends as a client disconnect does. The socket is reset, not
closed (SO_LINGER 0): a closed socket's kernel buffer, up to several MB, still trickles
its unsent data out to a client that reads at last, which then sees a stream that stops
mid-event, instead of a reset it can re-attach after at once. A turn outlives its
connection, so the client re-attaches from its Last-Event-ID when it reads again.

Under uvicorn, the request's scope says whether a write now would go out without waiting
(`rojo.write_ready`): a streamed chat's chunks are then written by the turn's own task
(roject/server/direct_writes.py).
"""

import asyncio
import contextlib
import functools
import logging
import socket
import struct
from collections.abc import Awaitable

from django.conf import settings
from django.core.exceptions import RequestAborted

from roject.server.direct_writes import WRITE_READY

logger = logging.getLogger(__name__)


class ClientStalled(RequestAborted):
    """The client read nothing for ROJO_CLIENT_WRITE_TIMEOUT seconds; it was disconnected."""


class _Producer:
    """A Twisted push producer that only records whether the transport has room."""

    def __init__(self) -> None:
        self.room = asyncio.Event()
        self.room.set()

    def pauseProducing(self) -> None:
        self.room.clear()

    def resumeProducing(self) -> None:
        self.room.set()

    def stopProducing(self) -> None:
        self.room.set()


class _Connection:
    """One response's connection, as far as this module needs: wait for room, abort."""

    def __init__(self, send) -> None:
        self.send = send
        self.daphne_request = _daphne_request(send)
        self.producer: _Producer | None = None
        # uvicorn's flow control (its request cycle's), or None under any other server.
        self.flow = getattr(getattr(send, "__self__", None), "flow", None)
        if not hasattr(self.flow, "write_paused"):
            self.flow = None

    def may_wait(self) -> bool:
        """Whether a write now could wait for the client: under uvicorn, only while its
        writing is paused; under daphne (its wait comes after the send) or another server,
        always."""
        return self.flow is None or self.flow.write_paused

    async def write(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            await self.send(message)
            if self.daphne_request is not None:
                self.producer = _Producer()
                self.daphne_request.registerProducer(self.producer, True)
            return
        if self.producer is not None and not message.get("more_body", False):
            self._unregister()  # Twisted logs a failure for a request finished with one
        await self.send(message)
        if self.producer is not None:
            await self.producer.room.wait()

    def _unregister(self) -> None:
        with contextlib.suppress(AttributeError):  # the request is gone already
            self.daphne_request.unregisterProducer()
        self.producer = None

    def abort(self) -> None:
        """Drop the connection now, unsent data included (the kernel's as well)."""
        if self.daphne_request is not None:
            self._unregister()
            transport = getattr(self.daphne_request, "transport", None)
            if transport is not None:
                _reset_on_close(getattr(transport, "getHandle", lambda: None)())
                transport.abortConnection()
            return
        transport = getattr(getattr(self.send, "__self__", None), "transport", None)
        if transport is not None and hasattr(transport, "abort"):
            _reset_on_close(transport.get_extra_info("socket"))
            transport.abort()  # uvicorn's asyncio transport


def _reset_on_close(sock) -> None:
    """Make closing `sock` reset the connection, dropping what the kernel still holds."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _daphne_request(send):
    """daphne's Twisted request behind its `send` (a partial of Server.handle_reply), or None."""
    if not isinstance(send, functools.partial) or not send.args:
        return None
    owner = getattr(send.func, "__self__", None)
    if type(owner).__module__ != "daphne.server":
        return None
    request = send.args[0]
    return request if hasattr(request, "registerProducer") else None


class WriteTimeout:
    """ASGI middleware: every HTTP response's writes bounded by ROJO_CLIENT_WRITE_TIMEOUT."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection = _Connection(send)

        flow = connection.flow
        if flow is not None:  # a write while it is not paused goes out at once (bounded_send)
            ready = {WRITE_READY: lambda: not flow.write_paused}
            scope["extensions"] = {**(scope.get("extensions") or {}), **ready}  # a copy: ours

        def bounded_send(message: dict) -> Awaitable[None]:
            # A plain function, not a coroutine: a write that cannot wait is uvicorn's send
            # itself, awaited by the caller, with no frame of ours on its way (once per chunk;
            # the chat's admission and the upload guard wrap send the same way).
            if flow is not None and not flow.write_paused:  # uvicorn's, with room: as may_wait
                return send(message)  # what connection.write does under uvicorn
            return bounded_write(message)

        async def bounded_write(message: dict) -> None:
            if not connection.may_wait():
                await connection.write(message)
                return
            timeout = settings.ROJO_CLIENT_WRITE_TIMEOUT or None
            try:
                # A timer per write, not a task as wait_for would make: this runs per event.
                async with asyncio.timeout(timeout):
                    await connection.write(message)
            except TimeoutError:
                connection.abort()
                logger.info(
                    "a client read nothing for %s s; disconnected (%s)", timeout, scope["path"]
                )
                raise ClientStalled from None

        try:
            await self.app(scope, receive, bounded_send)
        except ClientStalled:
            await asyncio.sleep(0)  # the server sees the connection lost before the app ends
