"""Reading a streamed response's body as it arrives, with one stall timer per stream.

On the SDK's aiohttp transport (rojo_client's), the body is read from aiohttp's own stream:
httpx2 and the SDK's transport adapter wrap it in four generators, which cost more per
network read than parsing what the read brings. aiohttp would also re-arm its read timeout
on every network read; instead, one timer per stream looks every quarter of the timeout
whether the provider sent anything, and fails the read as aiohttp does when it did not.
Any other transport is read through httpx2, with its own timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

import httpx2

if TYPE_CHECKING:  # imported where used: a management command needs no HTTP client
    import aiohttp

# The body's next bytes, b"" at its end; None for a quiet spell (see body_reader's `tick`).
Read = Callable[[], Awaitable[bytes | None]]
# Asked before each read: how long a quiet spell may last before the read returns None;
# None: the read waits as long as it takes (no timer: most reads of a stream need none).
Tick = Callable[[], float | None]
# Called before a read that will wait for the provider: what came so far is all for now.
Idle = Callable[[], None]

# The most bytes one read returns. A provider faster than the turn fills the transport's
# buffer; taking it all at once (~250 KB) would parse ~1,700 chunks into dicts together, a
# megabyte per turn held at once (docs/performance.md, "Slow clients").
READ_MAX = 64 * 1024


async def _pieces(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The bytes of `chunks` as they come, cut into pieces of at most READ_MAX."""
    async for chunk in chunks:
        for begin in range(0, len(chunk), READ_MAX):
            yield chunk[begin : begin + READ_MAX]


class _Body:
    """aiohttp's stream of one response, how much of it was read, and what to call before
    a read waits (body_reader's `idle`)."""

    def __init__(self, content: aiohttp.StreamReader, idle: Idle | None = None) -> None:
        self.content = content
        self.consumed = 0
        self.idle = idle

    async def read(self) -> bytes:
        data = await self.content.read(READ_MAX)
        self.consumed += len(data)
        return data

    async def read_or_tick(self, tick: Tick | None) -> bytes | None:
        """The next bytes, or None once tick()'s seconds passed without any. Cancelling
        aiohttp's wait for data loses nothing: what arrives stays in its buffer for the next
        read."""
        content = self.content
        seconds = None
        if content.total_bytes == self.consumed and not content.is_eof():  # it will wait
            if self.idle is not None:
                self.idle()
            if tick is not None:
                seconds = tick()
        if seconds is None:
            # Something is there already, or no quiet spell to watch for: no timer. (Read
            # here, not through read(): one coroutine fewer on every read's way back.)
            data = await content.read(READ_MAX)
            self.consumed += len(data)
            return data
        deadline = asyncio.timeout(seconds)
        try:
            async with deadline:
                return await self.read()
        except TimeoutError:
            if deadline.expired():
                return None
            raise  # the stall watch's own timeout


class _StallWatch:
    """Fails the body's read once the provider sent nothing for `seconds`.

    Only silence counts: while received bytes wait to be read (a consumer slower than the
    provider), the provider is not stalled. It fires between 1 and 1.25 times `seconds`
    after the last byte.
    """

    def __init__(self, body: _Body, seconds: float) -> None:
        self.body = body
        self.seconds = seconds
        self.loop = asyncio.get_running_loop()
        self.seen = -1
        self.since = self.loop.time()
        self.handle = self.loop.call_later(seconds / 4, self._check)

    def _check(self) -> None:
        received = self.body.content.total_bytes
        now = self.loop.time()
        if received != self.seen or self.body.consumed != received:
            self.seen, self.since = received, now
        elif now - self.since >= self.seconds:
            import aiohttp

            self.body.content.set_exception(
                aiohttp.SocketTimeoutError("Timeout on reading data from socket")
            )
            return
        self.handle = self.loop.call_later(self.seconds / 4, self._check)

    def stop(self) -> None:
        self.handle.cancel()


# The most one system call reads from the provider's socket: below glibc's threshold for
# a mapping of its own (ROJO_MALLOC_MMAP_KIB, 64 KiB, or glibc's 128 KiB).
RECV_MAX = 32 * 1024


def _recv_bounded(transport) -> None:
    """Have asyncio's socket transport read at most RECV_MAX at a time.

    It reads into a new bytes object of its `max_size` (256 KiB) and shrinks it to what came:
    above the allocator's mmap threshold, every read of a streamed chunk mapped, remapped and
    unmapped it (three system calls and a page fault per chunk, strace: 8.2 calls per chunk
    against 5.2). uvloop's transport reads into a buffer of its own and has no max_size.
    """
    if transport is not None and getattr(transport, "max_size", 0) > RECV_MAX:
        with contextlib.suppress(AttributeError):
            transport.max_size = RECV_MAX


@contextlib.contextmanager
def body_reader(
    response: httpx2.Response,
    timeout: float | None,
    tick: Tick | None = None,
    idle: Idle | None = None,
) -> Iterator[Read]:
    """A function returning the body's next bytes as they arrive, and b"" at its end.

    `timeout` is the longest silence allowed between two network reads (None: no limit).
    With `tick` (asked before each read), a read that waited that long for nothing returns
    None, so the reader can show what it has meanwhile (aiohttp's transport only; httpx2's
    reads are not cut). A read that tick() gives None waits with no timer. `idle` is called
    before each read that will wait (httpx2's: before every read).
    """
    import aiohttp

    adapter = getattr(response.stream, "_stream", None)  # httpx2's bound stream -> adapter's
    aiohttp_response = getattr(adapter, "_aiohttp_response", None)
    if not isinstance(aiohttp_response, aiohttp.ClientResponse):
        pieces = _pieces(response.aiter_bytes())

        async def read_pieces() -> bytes:
            if idle is not None:
                idle()
            return await anext(pieces, b"")

        yield read_pieces
        return
    body = _Body(aiohttp_response.content, idle)
    connection = aiohttp_response.connection  # None once the whole body has arrived
    read = functools.partial(body.read_or_tick, tick) if tick or idle else body.read
    if connection is not None and connection.protocol is not None:
        _recv_bounded(connection.protocol.transport)
    if connection is None or connection.protocol is None or not timeout:
        yield read
        return
    # This watch takes over from aiohttp's timer: the one set when the headers came (their
    # limit, ROJO_PROVIDER_HEADERS_TIMEOUT) is cancelled too, or it would cut off a first
    # silence longer than that (a server that answers at once, then reads a long prompt).
    connection.protocol.read_timeout = None
    connection.protocol.start_timeout()
    watch = _StallWatch(body, timeout)
    try:
        yield read
    finally:
        watch.stop()
