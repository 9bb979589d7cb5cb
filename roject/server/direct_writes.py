"""A streamed response whose parts can be written by the task that produces them.

A follower of a turn waits in its response's task for the turn's task to publish the next
event, and then writes it: every streamed chunk woke a second task (a future, a pass of the
event loop and its `epoll_wait`, two async generators and Django's loop over the body), about
a seventh of a chunk's CPU (docs/performance.md, section 14). The floor relay reads and
writes in one task. Here the producer writes the part itself, through the response's own
ASGI `send` (every middleware's wrapper included), while the response's task stays parked.

Only where a write cannot wait: the server says so (WriteTimeout's `rojo.write_ready`
extension, uvicorn's flow control not paused), and then no wrapper on the way suspends or
starts a timer bound to the running task (a write that may wait is bounded by a timer that
cancels its own task: it must be the response's). Everything else, under daphne, with a
slow client, after a failed write, goes the ordinary way: the response's task is woken and
writes. Its write waits first for a direct write still under way, so parts never interleave.
"""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from django.http import StreamingHttpResponse

# ASGI scope extension (WriteTimeout's): a function telling whether a write now goes out
# without waiting for the client.
WRITE_READY = "rojo.write_ready"


def write_ready_of(request) -> Callable[[], bool] | None:
    """The server's write_ready function for a request, or None (no direct writes: another
    server, or a request that came through WSGI, as the test client's do, with no scope)."""
    scope = getattr(request, "scope", None) or {}
    return (scope.get("extensions") or {}).get(WRITE_READY)


class DirectWriter:
    """Writes a response's body parts from the caller's task, while the response's waits."""

    def __init__(self, send, ready: Callable[[], bool]) -> None:
        self.send = send
        self.ready = ready
        self.broken = False  # a direct write raised: the response's task writes from now on
        self.pending: asyncio.Task | None = None  # a write that had to wait after all

    def write(self, data: bytes) -> bool:
        """Write `data` now, in the caller's task; False when it was not written (the
        response's task is to write it): the server would wait, a write is under way, or
        one failed (the response's task then meets the failure as it writes)."""
        if self.broken or self.pending is not None or not self.ready():
            return False
        try:
            sending = self.send({"type": "http.response.body", "body": data, "more_body": True})
            waited = sending.send(None)
        except StopIteration:
            return True
        except Exception:
            self.broken = True  # not written; told again where it belongs
            return False
        # Suspended after all (a server that said it would not wait): finish it in a task
        # of its own; the response's next write waits for it.
        self.pending = asyncio.ensure_future(_finish(sending, waited))
        return True

    async def settled(self) -> None:
        """Wait for a direct write still under way (its failure raised here)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            await pending


async def _finish(sending: Coroutine[Any, Any, None], waited: Any) -> None:
    """Drive a coroutine that suspended on `waited` (what it yielded) to its end, as a
    task's steps would."""
    while True:
        try:
            if waited is None:  # a bare yield: one pass of the loop
                await asyncio.sleep(0)
            else:
                waited._asyncio_future_blocking = False  # as Task.__step takes a future
                await waited
        except BaseException as exc:
            try:
                waited = sending.throw(exc)
            except StopIteration:
                return
            continue
        try:
            waited = sending.send(None)
        except StopIteration:
            return


class DirectStream(StreamingHttpResponse):
    """A streaming response whose body yields bytes, handed to the server as it is, and
    which may also be written directly (`writer`, once the server's handler bound it).

    Django's passes every part through two async generators of its own and make_bytes,
    which cost about as much as encoding the event; the body's parts are bytes already. A
    middleware that replaces the content gets Django's way back (and no writer).
    """

    def __init__(self, body, *, write_ready: Callable[[], bool] | None = None, **kwargs) -> None:
        super().__init__(body, **kwargs)
        self._body = self._iterator  # what Django made of `body`: the body itself
        self._write_ready = write_ready
        self.writer: DirectWriter | None = None

    def bind(self, send) -> None:
        """The handler's: its `send` for this response, before the body is read."""
        if self._write_ready is not None and self._iterator is self._body:
            self.writer = DirectWriter(send, self._write_ready)

    def __aiter__(self):
        if self._iterator is self._body:
            return self._body
        return super().__aiter__()
